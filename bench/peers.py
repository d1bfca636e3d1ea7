"""The sequential spawn workload of `spawn_overhead.py` on two peer frameworks, in memory,
offline, with a fake model class of theirs:

  openai-agents  a coordinator `Agent` whose tool is a child `Agent` (`as_tool`), both driven
                 by a `Model` subclass returning scripted responses; `Runner.run`
  langgraph      a `create_react_agent` graph whose tool invokes a child `create_react_agent`
                 graph; both driven by a `BaseChatModel` subclass returning scripted messages

Workload for N children: the coordinator calls its sub-agent tool N times, one call per model
turn, then answers "done"; each child answers "ok" in one model call. Reported: median wall
time of --repeat runs after a warm-up (fewer once --budget seconds went into one N), ms per child, and the ratio Clawboard / peer for the
same N (Clawboard's ms per child from `spawn_overhead.py`'s sequential workload, which
persists runs, events and transcripts in a database and goes through a worker queue; the
peers keep everything in memory).

Used by `python bench/spawn_overhead.py --peers` (same process run); on its own:
  python bench/peers.py [--sizes 10,100,1000] [--repeat 5] [--budget 30]
Needs the `bench` extra: pip install -e ".[bench]"
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import table  # noqa: E402

INSTALL_HINT = (
    'pip install -e ".[bench]"   (or: .venv/bin/pip install openai-agents langgraph langchain-core)'
)


# -- openai-agents -----------------------------------------------------------------------------


def openai_agents_workload() -> Callable[[int], None]:
    from agents import Agent, ModelResponse, ModelSettings, RunConfig, Runner, Usage, set_tracing_disabled
    from agents.models.interface import Model
    from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

    set_tracing_disabled(True)

    def message(text: str) -> ResponseOutputMessage:
        return ResponseOutputMessage(
            id="msg",
            type="message",
            role="assistant",
            status="completed",
            content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
        )

    class ScriptedModel(Model):
        """Calls `tool` once per turn for `calls` turns, then says `final`."""

        def __init__(self, calls: int, final: str, tool: str = "spawn_subagent") -> None:
            self.calls = calls
            self.final = final
            self.tool = tool
            self.turn = 0

        async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
            self.turn += 1
            if self.turn <= self.calls:
                output: Any = ResponseFunctionToolCall(
                    id=f"fc_{self.turn}",
                    call_id=f"call_{self.turn}",
                    type="function_call",
                    name=self.tool,
                    arguments='{"input": "child: work"}',
                )
            else:
                output = message(self.final)
            return ModelResponse(output=[output], usage=Usage(), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError("the benchmark never streams")  # abstract in the peer's Model

    class ChildModel(Model):
        async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
            return ModelResponse(output=[message("ok")], usage=Usage(), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError("the benchmark never streams")  # abstract in the peer's Model

    child = Agent(name="child", instructions="Do the work.", model=ChildModel())
    config = RunConfig(tracing_disabled=True)

    def run(n: int) -> None:
        coordinator = Agent(
            name="coordinator",
            instructions="Coordinate.",
            model=ScriptedModel(n, "done"),
            model_settings=ModelSettings(),
            tools=[child.as_tool(tool_name="spawn_subagent", tool_description="Run a subagent")],
        )
        result = asyncio.run(Runner.run(coordinator, "coordinate", max_turns=n + 5, run_config=config))
        if result.final_output != "done":
            raise RuntimeError(f"openai-agents: final output {result.final_output!r}")

    return run


# -- langgraph -------------------------------------------------------------------------------


def langgraph_workload() -> Callable[[int], None]:
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.tools import tool

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # create_react_agent's deprecation notice
        from langgraph.prebuilt import create_react_agent

    class ScriptedChatModel(BaseChatModel):
        """Calls `spawn_subagent` once per turn for `calls` turns (counted from the tool
        messages so far), then says `final`."""

        calls: int = 0
        final: str = "ok"

        @property
        def _llm_type(self) -> str:
            return "scripted"

        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

        def _generate(
            self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
        ) -> ChatResult:
            done = sum(1 for m in messages if isinstance(m, ToolMessage))
            if done < self.calls:
                reply = AIMessage(
                    content="",
                    tool_calls=[
                        {"name": "spawn_subagent", "args": {"prompt": "child: work"}, "id": f"call_{done}"}
                    ],
                )
            else:
                reply = AIMessage(content=self.final)
            return ChatResult(generations=[ChatGeneration(message=reply)])

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        child_graph = create_react_agent(ScriptedChatModel(calls=0, final="ok"), tools=[])

    @tool
    def spawn_subagent(prompt: str) -> str:
        """Run a subagent on a task and return its final answer."""
        result = child_graph.invoke({"messages": [HumanMessage(prompt)]})
        return str(result["messages"][-1].content)

    def run(n: int) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            graph = create_react_agent(ScriptedChatModel(calls=n, final="done"), tools=[spawn_subagent])
        result = graph.invoke({"messages": [HumanMessage("coordinate")]}, {"recursion_limit": 2 * n + 10})
        final = result["messages"][-1].content
        if final != "done":
            raise RuntimeError(f"langgraph: final output {final!r}")

    return run


PEERS: dict[str, tuple[tuple[str, ...], Callable[[], Callable[[int], None]]]] = {
    "openai-agents": (("agents",), openai_agents_workload),
    "langgraph": (("langgraph", "langchain_core"), langgraph_workload),
}


def _version(dist: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return "?"


def run_peers(
    sizes: list[int], repeat: int, results: dict[tuple[str, int], float], budget: float = 30.0
) -> dict[tuple[str, int], float]:
    """Run every installed peer on the sequential workload; print a table and, where
    `results` has Clawboard's ("sequential", N) ms per child, the ratio Clawboard / peer
    (above 1: Clawboard costs more per child)."""
    rows: list[list[Any]] = []
    measured: dict[tuple[str, int], float] = {}
    for name, (modules, factory) in PEERS.items():
        missing = [m for m in modules if importlib.util.find_spec(m) is None]
        if missing:
            print(f"{name}: skipped, {', '.join(missing)} not installed: {INSTALL_HINT}")
            continue
        run = factory()
        label = f"{name} {_version(name)}"
        for n in sizes:
            run(min(n, 10))  # warm-up
            times: list[float] = []
            # At least one run; no new one once `budget` seconds went into this N (openai-agents
            # grows quadratically with the turns: over a minute for one run of N=1000 here).
            while len(times) < repeat and sum(times) < budget:
                start = time.perf_counter()
                run(n)
                times.append(time.perf_counter() - start)
            per_child = statistics.median(times) / n * 1000
            measured[(name, n)] = per_child
            ours = results.get(("sequential", n))
            ratio = f"{ours / per_child:.1f}" if ours else "-"
            rows.append(
                [
                    label,
                    n,
                    len(times),
                    f"{statistics.median(times):.3f}",
                    f"{per_child:.3f}",
                    f"{ours:.2f}" if ours else "-",
                    ratio,
                ]
            )
            print(f"{name:14s} N={n:5d}: {per_child:.3f} ms per child", flush=True)
    if rows:
        print()
        print("sequential workload, peers in memory (Clawboard: database + worker queue):")
        print(
            table(["peer", "N", "runs", "median s", "ms/child", "Clawboard ms/child", "Clawboard/peer"], rows)
        )
    return measured


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="10,100,1000")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--budget", type=float, default=30.0, help="seconds per peer and N before repeats stop"
    )
    args = parser.parse_args()
    run_peers([int(s) for s in args.sizes.split(",")], args.repeat, {}, args.budget)


if __name__ == "__main__":
    main()
