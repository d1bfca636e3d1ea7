"""Real OTLP receivers for the trace suites: Arize Phoenix served from its own virtual
environment (`make phoenix`), and a gate in front of it that can refuse connections (the
receiver down) and then forward them (up again)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

PHOENIX = Path(os.environ.get("CLAWBOARD_PHOENIX", Path.home() / ".cache/clawboard/phoenix-venv/bin/phoenix"))
START_SECS = 180  # it runs its migrations at start; on a busy two-core machine that takes a while


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def phoenix(work_dir: Path) -> Iterator[str]:
    """A Phoenix server on free loopback ports, storing in `work_dir`, with everything that
    could reach outside turned off. Yields its base URL."""
    port, grpc = free_port(), free_port()
    env = {
        **os.environ,
        "PHOENIX_WORKING_DIR": str(work_dir),
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(grpc),
        "PHOENIX_ALLOW_EXTERNAL_RESOURCES": "false",
        "PHOENIX_TELEMETRY_ENABLED": "false",
    }
    for name in [k for k in env if k.startswith("OTEL_")]:
        del env[name]  # Phoenix instruments itself when told where to send
    log = open(work_dir / "phoenix.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen([str(PHOENIX), "serve"], env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_SECS
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"phoenix exited: {(work_dir / 'phoenix.log').read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{base}/healthz", timeout=2) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"phoenix did not answer in {START_SECS}s")
            time.sleep(0.5)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


class Gate:
    """A TCP port in front of a receiver: closed (nothing listens: connection refused) until
    `open()`, then forwarding every connection to `target`."""

    def __init__(self, target_port: int) -> None:
        self.port = free_port()
        self.target_port = target_port
        self._server: socket.socket | None = None
        self._stop = threading.Event()

    def open(self) -> None:
        server = socket.socket()
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", self.port))
        server.listen(16)
        server.settimeout(0.2)
        self._server = server
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self._stop.set()
        if self._server is not None:
            self._server.close()

    def _accept(self) -> None:
        assert self._server is not None
        while not self._stop.is_set():
            try:
                client, _ = self._server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=_pipe, args=(a, b), daemon=True).start()


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def spans_of(base: str, trace_hex: str, project: str = "default") -> list[dict[str, Any]]:
    """Every span Phoenix holds for one trace, through its REST API (`getSpans`)."""
    import json

    found: list[dict[str, Any]] = []
    cursor = ""
    while True:
        url = f"{base}/v1/projects/{project}/spans?trace_id={trace_hex}&limit=1000"
        if cursor:
            url += f"&cursor={cursor}"
        with urllib.request.urlopen(url, timeout=10) as answer:
            page = json.load(answer)
        found.extend(page["data"])
        cursor = page.get("next_cursor") or ""
        if not cursor:
            return found


def installed() -> bool:
    return PHOENIX.exists() and shutil.which(str(PHOENIX)) is not None
