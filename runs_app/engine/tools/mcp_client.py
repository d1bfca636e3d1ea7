"""Connections to MCP servers, with the official `mcp` SDK (docs/tools.md#mcp-tools).

One event-loop thread per process owns every connection (the SDK is asyncio/anyio); worker
threads hand it a request and wait for the answer, outside any database transaction. A
connection is kept for later calls, keyed by the server's configuration, the risk and runtime
profiles it runs under and the workspace, so two runs share a server process only when all of
those are equal; a connection whose process died, or whose call timed out (its state is then
unknown), is dropped and the next call starts the server again.

A stdio server runs inside the `shell` sandbox (sandbox.py) with its own limits: only the
workspace and the profile's roots, plus read-only what it needs to run (its interpreter and
installed package), no network unless `shell_network`, and no environment but the `env` it
declares. Its stdout carries one JSON-RPC message per line, at most `MAX_LINE_BYTES`; a longer
line or one that is not JSON-RPC ends the connection, with the reason kept for the error.
"""

from __future__ import annotations

import asyncio
import hashlib
import ipaddress
import json
import logging
import os
import resource
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import AsyncIterator
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import AsyncExitStack, asynccontextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
from mcp import ClientSession, types
from mcp.shared.message import SessionMessage

from agents_app import secrets
from agents_app.snapshot import McpServerSpec
from policies_app.specs import RiskProfileSpec, RuntimeProfileSpec, effective_shell_limit
from runs_app.engine.tools import sandbox

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_SECS = 30  # initialize and tools/list, as ZeroClaw
START_RETRY_SECS = 30  # a server that failed to start is not tried again sooner
MAX_LINE_BYTES = 4 * 1024 * 1024
STDERR_TAIL_BYTES = 2048
SANDBOX_PATH = "/usr/local/bin:/usr/bin:/bin"
# Addresses an HTTP server is never reached at: link-local ranges (cloud metadata lives there)
# and the metadata addresses that are not link-local.
METADATA_HOSTS = frozenset({"metadata.google.internal", "metadata", "instance-data"})
METADATA_ADDRESSES = frozenset(
    {ipaddress.ip_address("fd00:ec2::254"), ipaddress.ip_address("100.100.100.200")}
)


class McpError(Exception):
    """A failure a model reads as a tool error: `MCP server '<name>' <why>`."""

    def __init__(self, server: str, why: str, *, restart: bool = True) -> None:
        super().__init__(f"MCP server '{server}' {why}")
        self.server = server
        self.why = why
        self.restart = restart  # the connection cannot be trusted for another call


@dataclass(frozen=True)
class McpTool:
    name: str  # the server's own name, without the prefix
    description: str
    input_schema: dict[str, Any]
    annotations: dict[str, Any]


@dataclass(frozen=True)
class Sandbox:
    """Where and under what a stdio server runs."""

    risk: RiskProfileSpec
    runtime: RuntimeProfileSpec
    workspace: str


def connection_key(spec: McpServerSpec, where: Sandbox) -> str:
    from runs_app.engine.frozen import mcp_server_to_json, to_json

    data = {
        "server": mcp_server_to_json(spec),
        "risk": to_json(where.risk),
        "runtime": to_json(where.runtime),
        "workspace": where.workspace,
    }
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()


# ---------------------------------------------------------------------------------------------
# What a stdio server may see.


def _secret(server: str, field_name: str, key: str, value: Any) -> str:
    if value.missing:
        raise McpError(
            server, f"cannot start: {field_name}.{key} is a secret to enter again (it could not be imported)"
        )
    if value.env:
        found = os.environ.get(value.env)
        if found is None:
            raise McpError(
                server, f"cannot start: {field_name}.{key} names the variable {value.env}, which is not set"
            )
        return found
    try:
        return secrets.decrypt(value.token)
    except Exception as exc:  # a token from another key, or no key at all
        raise McpError(
            server, f"cannot start: {field_name}.{key} cannot be decrypted ({exc.__class__.__name__})"
        ) from exc


def server_environment(spec: McpServerSpec, workspace: str) -> dict[str, str]:
    """The server's whole environment: a PATH, HOME (the workspace), LANG, and its `env`."""
    env = {"PATH": SANDBOX_PATH, "HOME": workspace, "LANG": os.environ.get("LANG", "C.UTF-8")}
    for key, value in spec.env.items():
        env[key] = _secret(spec.name, "env", key, value)
    return env


def _package_root(path: Path) -> Path | None:
    """The installed package a file belongs to: the outermost `node_modules` directory above it
    (Node resolves every dependency there), or the Python virtual environment holding it."""
    found: Path | None = None
    for parent in path.parents:
        if parent.name == "node_modules":
            found = parent
        if (parent / "pyvenv.cfg").is_file():
            return parent
    return found


def _venv_home(venv: Path) -> Path | None:
    """The installation a virtual environment's interpreter comes from (`home` of pyvenv.cfg)."""
    for line in (venv / "pyvenv.cfg").read_text(errors="replace").splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "home" and value.strip():
            return _installation(Path(value.strip()) / "python")
    return None


def _installation(executable: Path) -> Path | None:
    """An interpreter's installation, `<prefix>/bin/<program>` -> `<prefix>` (pyenv, nvm, a
    Python or Node built into /opt): its libraries live beside it."""
    real = Path(os.path.realpath(executable))
    return real.parent.parent if real.parent.name == "bin" else None


def server_read_only_paths(command: str, args: tuple[str, ...]) -> tuple[str, ...]:
    """What a stdio server needs to run, bound read-only: the installation of its command's
    interpreter (and of a `#!` script's), and for the command and each argument that is an
    existing file, the `node_modules` directory or virtual environment it lies in (with the
    installation the environment was made from), else the file itself. Directories among
    the arguments are data, granted only by the risk profile. Everything under /usr is in the
    sandbox already."""
    paths: list[Path] = []
    program = shutil.which(command, path=os.environ.get("PATH", SANDBOX_PATH)) or command
    files = [Path(program)] + [Path(a) for a in args if os.path.isabs(a)]
    executables = [Path(program)]
    for candidate in files:
        for path in dict.fromkeys([candidate, Path(os.path.realpath(candidate))]):
            if not path.is_file():
                continue
            root = _package_root(path)
            if root is not None:
                paths += [root, Path(os.path.realpath(root))]
                if (root / "pyvenv.cfg").is_file():
                    paths.append(_venv_home(root) or root)
            else:
                paths.append(path)
            interpreter = _shebang(path)
            if interpreter.startswith("/"):
                executables.append(Path(interpreter))
    for executable in executables:
        if executable.is_file():
            paths.append(_installation(executable) or Path(os.path.realpath(executable)))
    kept = [str(p) for p in dict.fromkeys(paths)]
    return tuple(
        p for p in kept if p not in ("/", "/usr") and not p.startswith("/usr/") and os.path.exists(p)
    )


def _shebang(path: Path) -> str:
    try:
        with path.open("rb") as handle:
            first = handle.readline(256)
    except OSError:
        return ""
    if not first.startswith(b"#!"):
        return ""
    words = first[2:].decode("utf-8", "replace").split()
    return words[0] if words else ""


def stdio_argv(spec: McpServerSpec, where: Sandbox) -> list[str]:
    program = shutil.which(spec.command, path=os.environ.get("PATH", SANDBOX_PATH)) or spec.command
    argv = [program, *spec.args]
    if not where.risk.sandbox_enabled:
        return argv
    return sandbox.command_argv(
        where.risk,
        where.runtime,
        Path(where.workspace),
        argv,
        read_only_extra=server_read_only_paths(spec.command, spec.args),
        limits=sandbox.server_limit_args(where.runtime),
    )


def check_url(spec: McpServerSpec) -> None:
    """An HTTP server only at an http(s) URL whose host is not link-local or a metadata address."""
    parts = urlsplit(spec.url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise McpError(spec.name, f"cannot be reached: {spec.url!r} is not an http(s) URL")
    host = parts.hostname.lower().rstrip(".")
    if host in METADATA_HOSTS:
        raise McpError(spec.name, f"cannot be reached: {host} is a cloud metadata address")
    try:
        infos = socket.getaddrinfo(host, parts.port or (443 if parts.scheme == "https" else 80))
    except OSError as exc:
        raise McpError(spec.name, f"cannot be reached: {host} does not resolve ({exc})") from exc
    for info in infos:
        address = ipaddress.ip_address(str(info[4][0]).split("%")[0])
        if address.is_link_local or address in METADATA_ADDRESSES:
            raise McpError(
                spec.name,
                f"cannot be reached: {host} resolves to {address}, a link-local or metadata address",
            )


# ---------------------------------------------------------------------------------------------
# The stdio transport: the SDK's streams over a sandboxed process, with a line cap.


@dataclass
class _Process:
    proc: asyncio.subprocess.Process
    sandboxed: bool = True
    problem: str = ""  # why the connection ended, when the server did something wrong
    stderr_tail: bytearray = field(default_factory=bytearray)

    def why_gone(self) -> str:
        if self.problem:
            return self.problem
        code = self.proc.returncode
        tail = self.stderr_tail.decode("utf-8", "replace").strip().splitlines()
        said = f": {tail[-1][:300]}" if tail else ""
        if code is None:
            return f"closed its output{said}"
        if code < 0:
            return f"died (signal {-code}){said}"
        if code > 128 and self.sandboxed:  # bubblewrap's init reports a signal as 128 + its number
            return f"died (signal {code - 128}){said}"
        return f"exited with status {code}{said}"


def _kill(process: _Process) -> None:
    proc = process.proc
    if proc.returncode is None:
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)


@asynccontextmanager
async def _stdio(
    argv: list[str], env: dict[str, str], cwd: str, sandboxed: bool
) -> AsyncIterator[tuple[Any, Any, _Process]]:
    Path(cwd).mkdir(parents=True, exist_ok=True)
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=cwd,
        start_new_session=True,  # its own group: the whole sandbox is killed with it
        limit=MAX_LINE_BYTES,
    )
    process = _Process(proc, sandboxed)
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)

    async def stdout_reader() -> None:
        assert proc.stdout is not None
        async with read_writer:
            while True:
                try:
                    line = await proc.stdout.readuntil(b"\n")
                except asyncio.IncompleteReadError:
                    return
                except asyncio.LimitOverrunError:
                    process.problem = f"sent a message longer than {MAX_LINE_BYTES} bytes"
                    _kill(process)
                    return
                if not line.strip():
                    continue
                try:
                    message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
                except ValueError:
                    shown = line[:80].decode("utf-8", "replace").strip()
                    process.problem = f"answered something that is not JSON-RPC: {shown!r}"
                    _kill(process)
                    return
                await read_writer.send(SessionMessage(message))

    async def stderr_reader() -> None:
        assert proc.stderr is not None
        while chunk := await proc.stderr.read(65536):
            process.stderr_tail += chunk
            del process.stderr_tail[:-STDERR_TAIL_BYTES]

    async def stdin_writer() -> None:
        assert proc.stdin is not None
        async with write_reader:
            async for message in write_reader:
                data = message.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                try:
                    proc.stdin.write(data.encode())
                    await proc.stdin.drain()
                except (BrokenPipeError, ConnectionResetError):
                    return

    try:
        async with anyio.create_task_group() as group:
            group.start_soon(stdout_reader)
            group.start_soon(stderr_reader)
            group.start_soon(stdin_writer)
            try:
                yield read_stream, write_stream, process
            finally:
                _kill(process)
                group.cancel_scope.cancel()
    finally:
        _kill(process)
        with suppress(Exception):
            await asyncio.wait_for(proc.wait(), 5)


# ---------------------------------------------------------------------------------------------
# A connection, kept open in a task of the loop until it is closed.


class Connection:
    def __init__(self, spec: McpServerSpec, where: Sandbox) -> None:
        self.spec = spec
        self.where = where
        self.tools: list[McpTool] = []
        self.session: ClientSession | None = None
        self.process: _Process | None = None
        self._closed = asyncio.Event()
        self._ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._task: asyncio.Task[None] | None = None

    @property
    def alive(self) -> bool:
        if self._task is None or self._task.done() or self.session is None:
            return False
        return self.process is None or (self.process.proc.returncode is None and not self.process.problem)

    def why_gone(self) -> str:
        if self.process is not None:
            return self.process.why_gone()
        return "closed the connection"

    async def open(self) -> None:
        self._task = asyncio.ensure_future(self._run())
        try:
            await asyncio.wait_for(asyncio.shield(self._ready), CONNECT_TIMEOUT_SECS)
        except TimeoutError:
            await self.close()
            raise McpError(self.spec.name, f"did not start within {CONNECT_TIMEOUT_SECS}s") from None

    async def _run(self) -> None:
        try:
            async with AsyncExitStack() as stack:
                read, write = await self._transport(stack)
                session = await stack.enter_async_context(ClientSession(read, write))
                await session.initialize()
                self.tools = await _list_tools(session)
                self.session = session
                self._ready.set_result(None)
                await self._closed.wait()
        except McpError as exc:
            if not self._ready.done():
                self._ready.set_exception(exc)
        except BaseException as exc:  # the SDK raises grouped errors when a transport fails
            if not self._ready.done():
                why = (
                    self.why_gone()
                    if self.process is not None and self.process.proc.returncode is not None
                    else ""
                )
                self._ready.set_exception(
                    McpError(self.spec.name, f"failed to start: {why or _describe(exc)}")
                )
            if isinstance(exc, asyncio.CancelledError):
                raise
        finally:
            self.session = None

    async def _transport(self, stack: AsyncExitStack) -> tuple[Any, Any]:
        spec = self.spec
        if spec.transport == "stdio":
            if self.where.risk.sandbox_enabled:
                state = sandbox.status()
                if not state.available:
                    raise McpError(spec.name, f"cannot start: the sandbox is unavailable ({state.detail})")
            env = server_environment(spec, self.where.workspace)
            argv = stdio_argv(spec, self.where)
            read, write, process = await stack.enter_async_context(
                _stdio(argv, env, self.where.workspace, self.where.risk.sandbox_enabled)
            )
            self.process = process
            return read, write
        headers = {k: _secret(spec.name, "headers", k, v) for k, v in spec.headers.items()}
        await asyncio.to_thread(check_url, spec)
        if spec.transport == "sse":
            from mcp.client.sse import sse_client

            streams = await stack.enter_async_context(sse_client(spec.url, headers=headers))
            return streams[0], streams[1]
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        client = await stack.enter_async_context(create_mcp_http_client(headers=headers))
        streams = await stack.enter_async_context(streamable_http_client(spec.url, http_client=client))
        return streams[0], streams[1]

    async def call(self, tool: str, arguments: dict[str, Any], timeout: float) -> types.CallToolResult:
        session = self.session
        if session is None or not self.alive:
            raise McpError(self.spec.name, self.why_gone())
        self._allow_cpu_for_one_call()
        call = asyncio.ensure_future(session.call_tool(tool, arguments))
        gone = asyncio.ensure_future(self._watch())
        try:
            done, _ = await asyncio.wait({call, gone}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            gone.cancel()
        if call in done:
            try:
                result = call.result()
            except Exception as exc:
                await self._settled()
                if not self.alive:
                    raise McpError(self.spec.name, self.why_gone()) from exc
                why = f"failed the call to '{tool}': {_describe(exc)}"
                raise McpError(self.spec.name, why, restart=False) from exc
            if not isinstance(result, types.CallToolResult):
                raise McpError(
                    self.spec.name, f"answered '{tool}' with an unexpected {type(result).__name__}"
                )
            return result
        call.cancel()
        await self._settled()
        if not self.alive:
            raise McpError(self.spec.name, self.why_gone())
        raise McpError(
            self.spec.name,
            f"did not answer '{tool}' within {timeout:g}s; the outcome is unknown and the call was not "
            "repeated (the server is restarted for the next call)",
        )

    async def _settled(self) -> None:
        """After a failed call, give a server that is going away the moment to exit, so that
        the error says why (its exit status) rather than only that the connection closed."""
        if self.process is not None and self.process.proc.returncode is None:
            with suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self.process.proc.wait()), 2)

    async def _watch(self) -> None:
        while self.alive:
            await asyncio.sleep(0.1)

    def _allow_cpu_for_one_call(self) -> None:
        """RLIMIT_CPU counts a process's whole life; a long-lived server gets the per-call
        allowance on top of what it used so far, before each call."""
        if self.process is None or not self.where.risk.sandbox_enabled:
            return
        allowance = effective_shell_limit(self.where.runtime, "mcp_max_cpu_secs")
        ticks = os.sysconf("SC_CLK_TCK")
        for pid in _descendants(self.process.proc.pid):
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                if Path(f"/proc/{pid}/exe").resolve() == Path(sandbox.bwrap_path()).resolve():
                    continue
                # Rounded up: RLIMIT_CPU is in whole seconds, and a limit rounded down would
                # leave a call less than its allowance.
                used = -(-(int(fields[11]) + int(fields[12])) // ticks)
                resource.prlimit(pid, resource.RLIMIT_CPU, (used + allowance, resource.RLIM_INFINITY))
            except (OSError, ValueError, IndexError):
                continue

    async def close(self) -> None:
        self._closed.set()
        if self.process is not None:
            _kill(self.process)
        if self._task is not None:
            with suppress(BaseException):
                await asyncio.wait_for(self._task, 10)


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


async def _list_tools(session: ClientSession) -> list[McpTool]:
    tools: list[McpTool] = []
    cursor: str | None = None
    for _ in range(100):
        params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await session.list_tools(params=params)
        for tool in page.tools:
            notes = tool.annotations.model_dump(by_alias=True, exclude_none=True) if tool.annotations else {}
            tools.append(McpTool(tool.name, tool.description or "", dict(tool.input_schema or {}), notes))
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


def _describe(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).strip() or exc.__class__.__name__
    return text[:300]


# ---------------------------------------------------------------------------------------------
# The pool: this process's connections, on one loop thread.


class Pool:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._connections: dict[str, Connection] = {}
        self._opening: dict[str, asyncio.Future[Connection]] = {}
        # Servers that failed to start, by key: (when, the error), so that a broken server is
        # not started again at every model turn of every run for a while.
        self._failed: dict[str, tuple[float, McpError]] = {}

    def _event_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._thread is None or not self._thread.is_alive():
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name="clawboard-mcp", daemon=True)
                thread.start()
                self._loop, self._thread = loop, thread
            return self._loop

    def _run(self, coro: Any, timeout: float) -> Any:
        future = asyncio.run_coroutine_threadsafe(coro, self._event_loop())
        try:
            return future.result(timeout + 5)
        except FutureTimeout:
            future.cancel()
            raise

    async def _connection(self, spec: McpServerSpec, where: Sandbox) -> tuple[Connection, bool]:
        """The live connection of this key, started (again) if need be; True when new."""
        key = connection_key(spec, where)
        known = self._connections.get(key)
        if known is not None and known.alive:
            return known, False
        if known is not None:
            self._connections.pop(key, None)
            await known.close()
        opening = self._opening.get(key)
        if opening is not None:  # another call is starting it: share that start
            return await asyncio.shield(opening), False
        failed = self._failed.get(key)
        if failed is not None and time.monotonic() - failed[0] < START_RETRY_SECS:
            raise failed[1]
        future: asyncio.Future[Connection] = asyncio.get_running_loop().create_future()
        self._opening[key] = future
        try:
            connection = Connection(spec, where)
            await connection.open()
            self._connections[key] = connection
            self._failed.pop(key, None)
            future.set_result(connection)
            return connection, True
        except BaseException as exc:
            if isinstance(exc, McpError):
                self._failed[key] = (time.monotonic(), exc)
            future.set_exception(exc)
            future.exception()  # retrieved: no "never retrieved" warning when nobody shares it
            raise
        finally:
            self._opening.pop(key, None)

    def tools(self, spec: McpServerSpec, where: Sandbox) -> tuple[list[McpTool], bool]:
        """The server's tools (starting it if need be), and whether it was (re)started now."""

        async def go() -> tuple[list[McpTool], bool]:
            connection, new = await self._connection(spec, where)
            return connection.tools, new

        return self._run(go(), CONNECT_TIMEOUT_SECS)

    def call(
        self, spec: McpServerSpec, where: Sandbox, tool: str, arguments: dict[str, Any]
    ) -> types.CallToolResult:
        async def go() -> types.CallToolResult:
            connection, _ = await self._connection(spec, where)
            try:
                return await connection.call(tool, arguments, spec.timeout_secs)
            except McpError as exc:
                # A timeout leaves the server in an unknown state, and a dead one is dead:
                # either way the next call starts it again.
                if exc.restart or not connection.alive:
                    await self._drop(connection)
                raise

        return self._run(go(), CONNECT_TIMEOUT_SECS + spec.timeout_secs)

    async def _drop(self, connection: Connection) -> None:
        for key, known in list(self._connections.items()):
            if known is connection:
                del self._connections[key]
        await connection.close()

    def close_all(self) -> None:
        """Stop every server of this process (tests, and a worker shutting down)."""
        if self._loop is None:
            return

        async def go() -> None:
            connections = list(self._connections.values())
            self._connections.clear()
            self._failed.clear()
            for connection in connections:
                await connection.close()

        with suppress(Exception):
            self._run(go(), 30)

    def server_pids(self) -> list[int]:
        """The process ids of the live stdio servers (for tests and the health page)."""
        return [c.process.proc.pid for c in self._connections.values() if c.process is not None and c.alive]


POOL = Pool()
