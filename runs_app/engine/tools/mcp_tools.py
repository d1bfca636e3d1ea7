"""MCP tools as a run sees them (docs/tools.md#mcp-tools): which are offered to its model, how
a call runs and what the model reads back, `tool_search` for deferred tools, and what the
workers last saw of each server (`McpServerState`).

A run's servers are the ones frozen in its policy at admission; their tools are listed from
the live server (pool in mcp_client.py) and filtered by the same policy every turn."""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from typing import Any

from django.utils import timezone

from agents_app.snapshot import McpServerSpec
from policies_app.policy import (
    TOOL_SEARCH,
    McpCeiling,
    is_tool_allowed,
    mcp_is_read_only,
    mcp_needs_approval,
    mcp_server_of,
    mcp_tool_name,
    mcp_tool_verdict,
    readonly_refusal,
)
from policies_app.specs import RiskProfileSpec, RuntimeProfileSpec
from policies_app.tracker import BudgetExhausted
from runs_app.engine.budget import spend_action
from runs_app.engine.providers import ToolSpec
from runs_app.engine.tools.base import ToolResult
from runs_app.engine.tools.mcp_client import POOL, McpError, McpTool, Sandbox
from runs_app.models import McpServerState, ToolCall

log = logging.getLogger(__name__)

# What a model may be offered as a function name (OpenAI's rule), and what ToolCall.name holds.
TOOL_NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
UNTRUSTED_OPEN = '<mcp-result server="{server}" tool="{tool}" trust="untrusted-external">'
UNTRUSTED_CLOSE = "</mcp-result>"
DEFAULT_SEARCH_RESULTS = 5
TOOL_SEARCH_SPEC = ToolSpec(
    name=TOOL_SEARCH,
    description=(
        "Find deferred MCP tools and make them callable for the rest of this run. query: keywords "
        "matched against tool names and descriptions, or 'select:<name>,<name>' for exact names."
    ),
    parameters={
        "type": "object",
        "properties": {
            "query": {"type": "string"},
            "max_results": {"type": "integer", "default": DEFAULT_SEARCH_RESULTS},
        },
        "required": ["query"],
    },
)


@dataclass(frozen=True)
class Offered:
    """One MCP tool a run may call."""

    name: str  # <server>__<tool>
    server: McpServerSpec
    tool: McpTool

    @property
    def spec(self) -> ToolSpec:
        schema = self.tool.input_schema or {"type": "object", "properties": {}}
        return ToolSpec(name=self.name, description=self.tool.description, parameters=schema)


@dataclass(frozen=True)
class Verdict:
    """One MCP tool as the permissions panel shows it."""

    name: str
    server: str
    status: str  # admitted | gated | blocked | unknown (the server's tools are not known)
    reason: str


@dataclass(frozen=True)
class RunMcp:
    """What a run's policy says about MCP, with the run's workspace: all `offered` needs."""

    servers: tuple[McpServerSpec, ...]
    deferred: bool
    ceilings: tuple[McpCeiling, ...]
    risk: RiskProfileSpec
    runtime: RuntimeProfileSpec
    workspace: str

    @property
    def sandbox(self) -> Sandbox:
        return Sandbox(self.risk, self.runtime, self.workspace)


def run_mcp(policy: Any, workspace: str) -> RunMcp:
    return RunMcp(
        policy.mcp, policy.mcp_deferred, policy.mcp_ceilings, policy.risk, policy.runtime, workspace
    )


def _listed(spec: McpServerSpec, where: Sandbox, down: dict[str, str] | None = None) -> list[McpTool] | None:
    try:
        tools, started = POOL.tools(spec, where)
    except McpError as exc:
        record_error(spec.name, exc.why)
        if down is not None:
            down[spec.name] = str(exc)
        return None
    if started:
        record_started(spec.name, tools)
    return tools


def all_tools(mcp: RunMcp) -> list[tuple[McpServerSpec, McpTool | None, str]]:
    """Every tool of the run's servers, filtered by nothing: (server, tool, problem). A server
    that cannot be listed gives one row with no tool and the reason."""
    rows: list[tuple[McpServerSpec, McpTool | None, str]] = []
    for spec in mcp.servers:
        tools = _listed(spec, mcp.sandbox)
        if tools is None:
            state = McpServerState.objects.filter(server=spec.name).first()
            rows.append((spec, None, state.last_error if state else "could not be listed"))
            continue
        rows += [(spec, tool, "") for tool in tools]
    return rows


def verdicts(mcp: RunMcp, listed: dict[str, list[McpTool] | str] | None = None) -> list[Verdict]:
    """Each MCP tool of the run: admitted, gated behind an approval, or blocked, and why.
    `listed`: each server's tools (or why it has none) as already known, instead of asking
    the servers (the dashboard reads what the workers recorded, `McpServerState`)."""
    rows: list[tuple[McpServerSpec, McpTool | None, str]]
    if listed is None:
        rows = all_tools(mcp)
    else:
        rows = []
        for spec in mcp.servers:
            known = listed.get(spec.name, "not started yet")
            if isinstance(known, str):
                rows.append((spec, None, known))
            else:
                rows += [(spec, tool, "") for tool in known]
    found: list[Verdict] = []
    seen: set[str] = set()
    for spec, tool, problem in rows:
        if tool is None:
            found.append(
                Verdict(f"{spec.name}__*", spec.name, "blocked", f"the server is unavailable: {problem}")
            )
            continue
        name = mcp_tool_name(spec.name, tool.name)
        found.append(_verdict(mcp, spec, tool, name, seen))
        seen.add(name)
    return found


def _verdict(mcp: RunMcp, spec: McpServerSpec, tool: McpTool, name: str, seen: set[str]) -> Verdict:
    if not TOOL_NAME_RE.match(name):
        return Verdict(
            name, spec.name, "blocked", "the name is not a valid tool name (A-Z a-z 0-9 _ -, at most 64)"
        )
    if name in seen:
        return Verdict(name, spec.name, "blocked", "the server lists this name twice")
    why = mcp_tool_verdict(mcp.risk, mcp.ceilings, name)
    if why:
        return Verdict(name, spec.name, "blocked", why)
    if mcp.risk.level == "readonly" and not mcp_is_read_only(tool.annotations):
        return Verdict(
            name, spec.name, "blocked", "read-only level, and the tool is not annotated readOnlyHint"
        )
    if mcp_needs_approval(mcp.risk, name, tool.annotations):
        reason = (
            "listed in always_ask"
            if name in mcp.risk.always_ask or "*" in mcp.risk.always_ask
            else "annotated destructiveHint and not in auto_approve"
        )
        return Verdict(name, spec.name, "gated", reason)
    reason = "allowed_tools admits every name containing __" if mcp.risk.allowed_tools else "no allow-list"
    return Verdict(name, spec.name, "admitted", reason)


def offered(mcp: RunMcp, down: dict[str, str] | None = None) -> dict[str, Offered]:
    """The MCP tools the run may call (gated ones included: they wait for an approval).
    `down` collects, per server that could not be listed, the error a call to it gets."""
    if not mcp.servers:
        return {}
    tools: dict[str, Offered] = {}
    for spec in mcp.servers:
        for tool in _listed(spec, mcp.sandbox, down) or []:
            name = mcp_tool_name(spec.name, tool.name)
            if (
                name in tools
                or not TOOL_NAME_RE.match(name)
                or mcp_tool_verdict(mcp.risk, mcp.ceilings, name)
            ):
                continue
            tools[name] = Offered(name, spec, tool)
    return tools


def gated(tools: dict[str, Offered], risk: RiskProfileSpec) -> frozenset[str]:
    return frozenset(n for n, o in tools.items() if mcp_needs_approval(risk, n, o.tool.annotations))


def tool_search_allowed(mcp: RunMcp) -> bool:
    return mcp.deferred and bool(mcp.servers) and is_tool_allowed(mcp.risk, TOOL_SEARCH)


def search(tools: dict[str, Offered], query: str, max_results: int) -> list[Offered]:
    """`select:a,b` picks exact names; otherwise the tools whose name or description holds
    the most of the query's words, best first."""
    query = query.strip()
    if query.startswith("select:"):
        wanted = [w.strip() for w in query[len("select:") :].split(",") if w.strip()]
        return [tools[w] for w in dict.fromkeys(wanted) if w in tools]
    words = [w for w in re.split(r"\W+", query.lower()) if w]
    scored = []
    for name, tool in tools.items():
        text = f"{name} {tool.tool.description}".lower()
        score = sum(1 for w in words if w in text)
        if score:
            scored.append((-score, name))
    return [tools[name] for _, name in sorted(scored)[:max_results]]


def activated(run: Any, tools: dict[str, Offered]) -> set[str]:
    """Deferred tools the run's earlier `tool_search` calls activated (for the rest of the run)."""
    names: set[str] = set()
    for arguments in ToolCall.objects.filter(
        run=run, name=TOOL_SEARCH, status=ToolCall.Status.DONE
    ).values_list("arguments", flat=True):
        query, limit = _search_args(arguments if isinstance(arguments, dict) else {})
        if query is not None:
            names |= {o.name for o in search(tools, query, limit)}
    return names


def _search_args(args: dict[str, Any]) -> tuple[str | None, int]:
    query = args.get("query")
    limit = args.get("max_results", DEFAULT_SEARCH_RESULTS)
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        limit = DEFAULT_SEARCH_RESULTS
    return (query if isinstance(query, str) and query.strip() else None), min(limit, 50)


def tool_search(tools: dict[str, Offered], args: dict[str, Any]) -> ToolResult:
    query, limit = _search_args(args)
    if query is None:
        return ToolResult.fail("Missing 'query' parameter")
    found = search(tools, query, limit)
    if not found:
        return ToolResult.ok("No matching deferred tools.")
    functions = [
        json.dumps({"name": o.name, "description": o.tool.description, "parameters": o.spec.parameters})
        for o in found
    ]
    return ToolResult.ok("<functions>\n" + "\n".join(functions) + "\n</functions>")


def deferred_prompt(tools: dict[str, Offered]) -> str:
    """The system prompt's section when MCP tools are deferred: names only."""
    lines = [
        f"{o.name} - {o.tool.description.splitlines()[0][:200] if o.tool.description else ''}"
        for o in tools.values()
    ]
    return (
        "## Deferred Tools\n\nThese MCP tools exist but are not loaded. Call tool_search with "
        "'select:<name>' (or keywords) to load them before calling them.\n"
        "<available-deferred-tools>\n" + "\n".join(lines) + "\n</available-deferred-tools>"
    )


def call(
    mcp: RunMcp, tools: dict[str, Offered], name: str, args: Any, *, tracker_key: str, limit: int
) -> ToolResult:
    """One MCP tool call, outside any transaction. Failures name the server and why."""
    offer = tools.get(name)
    if offer is None:
        return ToolResult.fail(f"Tool '{name}' is not available to this agent")
    read_only = mcp_is_read_only(offer.tool.annotations)
    if mcp.risk.level == "readonly" and not read_only:
        return ToolResult.fail(readonly_refusal(name))
    if not read_only:
        try:
            spend_action(key=tracker_key, runtime=mcp.runtime)
        except BudgetExhausted as exc:
            return ToolResult.fail(exc.message)
    server = offer.server.name
    try:
        result = POOL.call(offer.server, mcp.sandbox, offer.tool.name, args if isinstance(args, dict) else {})
    except McpError as exc:
        record_error(server, exc.why, called=True)
        return ToolResult.fail(str(exc))
    except Exception as exc:  # the pool itself failed: still the call's error, never the run's
        log.exception("MCP call %s failed", name)
        record_error(server, f"failed: {exc.__class__.__name__}", called=True)
        return ToolResult.fail(f"MCP server '{server}' failed: {exc.__class__.__name__}")
    record_call(server)
    text = result_text(result)
    if result.is_error:
        return ToolResult.fail(
            f"MCP server '{server}' tool '{offer.tool.name}' reported an error: {_cut(text, min(limit, 2000))}"
        )
    return ToolResult.ok(wrap_untrusted(server, offer.tool.name, _cut(text, limit)))


def result_text(result: Any) -> str:
    """What a call answered, as text: text blocks as they are, other blocks summarised, and the
    structured content when there is no text."""
    parts: list[str] = []
    for block in result.content or []:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
        elif kind in ("image", "audio"):
            parts.append(
                f"[{kind} {getattr(block, 'mime_type', '')}, {len(getattr(block, 'data', '') or '')} base64 characters]"
            )
        elif kind == "resource":
            resource = block.resource
            parts.append(getattr(resource, "text", None) or f"[resource {resource.uri}]")
        elif kind == "resource_link":
            parts.append(f"[resource link {block.uri}]")
        else:
            parts.append(f"[{kind} content]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    return "\n".join(parts)


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[... truncated: {len(text) - limit} more characters]"


def wrap_untrusted(server: str, tool: str, text: str) -> str:
    """The result as the model reads it: marked as data from outside, which no text inside
    can close early."""
    inner = text.replace(UNTRUSTED_CLOSE, "</mcp-result (escaped)>")
    return UNTRUSTED_OPEN.format(server=server, tool=tool) + "\n" + inner + "\n" + UNTRUSTED_CLOSE


def server_of(name: str) -> str:
    return mcp_server_of(name)


# ---------------------------------------------------------------------------------------------
# McpServerState: what the workers last saw of each server.


def record_started(server: str, tools: list[McpTool]) -> None:
    listed = [
        {"name": t.name, "description": t.description[:500], "annotations": t.annotations} for t in tools
    ]
    McpServerState.objects.update_or_create(
        server=server, defaults={"tools": listed, "started_at": timezone.now()}
    )


def record_call(server: str) -> None:
    McpServerState.objects.update_or_create(server=server, defaults={"last_call_at": timezone.now()})


def record_error(server: str, why: str, *, called: bool = False) -> None:
    now = timezone.now()
    values: dict[str, Any] = {"last_error": why[:2000], "last_error_at": now}
    if called:
        values["last_call_at"] = now
    McpServerState.objects.update_or_create(server=server, defaults=values)
