"""Servers and clients for the benchmarks that talk to Clawboard over loopback, the way an
operator's script does (REST with a token, a websocket with a session cookie).

`Server("embedded")` is `manage.py serve` on a fresh DATA_DIR and SQLite database (daphne and
the in-process worker in one process). `Server("scale-out")` is a throwaway PostgreSQL
database, a pair of Redis databases (broker, channel layer), `celery worker` processes
(threads pool) and one daphne process. Every process is started here, in its own session,
and stopped by its own pid; the database is dropped and the Redis databases emptied at the
end. Both run with DEBUG off (as deployed), over plain HTTP on 127.0.0.1.

Nothing here imports Django: the benchmark process is a client."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import json
import math
import os
import re
import secrets
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
PG_URL = os.environ.get("CLAWBOARD_BENCH_PG", "postgres://postgres@127.0.0.1:5432/postgres")
REDIS_URL = os.environ.get("CLAWBOARD_BENCH_REDIS", "redis://127.0.0.1:6379").rstrip("/")
# (broker, channel layer) pairs; tests/distributed uses 9-14, so two benchmarks and a test
# session on one machine never consume each other's messages.
REDIS_DB_PAIRS: tuple[tuple[int, int], ...] = ((7, 8), (5, 6), (3, 4))
CLAIM_KEY = "clawboard:bench:owner"
MODES = ("embedded", "scale-out")
TERMINAL = frozenset({"completed", "failed", "cancelled", "timed_out", "lost"})


# -- small numeric helpers ---------------------------------------------------------------------


def pct(values: list[float], p: float) -> float:
    """Nearest-rank percentile (p in 0..100); NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def ms(seconds: float) -> str:
    return "-" if math.isnan(seconds) else f"{seconds * 1000:.1f}"


def parse_at(text: str) -> float:
    """An ISO timestamp of the API (`at`, `created_at`, ...) as a Unix time."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def load_note() -> str:
    one, five, _ = os.getloadavg()
    return f"{os.cpu_count()} CPUs, load average {one:.2f} (1 min) {five:.2f} (5 min)"


def parse_modes(text: str) -> list[str]:
    modes = [m.strip() for m in text.split(",") if m.strip()]
    for mode in modes:
        if mode not in MODES:
            raise SystemExit(f"unknown mode {mode!r}: use {', '.join(MODES)}")
    return modes


# -- services ------------------------------------------------------------------------------------


def _why(exc: Exception) -> str:
    return f"{exc.__class__.__name__}: {' '.join(str(exc).split())}"


def scale_out_problem() -> str | None:
    """Why the scale-out mode cannot run here, or None."""
    try:
        import psycopg
        import redis
    except ImportError as exc:
        return f"a client library is missing ({exc})"
    try:
        with psycopg.connect(PG_URL, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except Exception as exc:  # noqa: BLE001 - any failure means "not reachable"
        return f"PostgreSQL is not reachable at {_shown(PG_URL)} ({_why(exc)})"
    try:
        redis.Redis.from_url(f"{REDIS_URL}/0", socket_timeout=3, socket_connect_timeout=3).ping()
    except Exception as exc:  # noqa: BLE001
        return f"Redis is not reachable at {REDIS_URL} ({_why(exc)})"
    for tool in ("celery", "daphne"):
        if not (BIN / tool).exists():
            return f"{BIN / tool} is missing (make install)"
    return None


def _shown(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    return parts._replace(netloc=parts.netloc.replace(f":{parts.password}@", ":***@")).geturl()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _claim_redis_pair() -> tuple[int, int]:
    import redis

    owner = f"{socket.gethostname()}:{os.getpid()}"
    for broker_db, layer_db in REDIS_DB_PAIRS:
        r = redis.Redis.from_url(f"{REDIS_URL}/{broker_db}")
        holder = r.get(CLAIM_KEY)
        if holder is not None:
            host, _, pid = holder.decode().partition(":")
            if host == socket.gethostname() and pid.isdigit() and not _pid_alive(int(pid)):
                r.delete(CLAIM_KEY)  # left behind by a benchmark that died
        if r.set(CLAIM_KEY, owner, nx=True, ex=3600):
            for key in r.scan_iter(count=500):
                if key != CLAIM_KEY.encode():
                    r.delete(key)
            redis.Redis.from_url(f"{REDIS_URL}/{layer_db}").flushdb()
            return broker_db, layer_db
    raise RuntimeError(f"every Redis database pair {REDIS_DB_PAIRS} is in use by another benchmark")


def _release_redis_pair(pair: tuple[int, int]) -> None:
    import redis

    with contextlib.suppress(redis.RedisError):
        for db in reversed(pair):
            redis.Redis.from_url(f"{REDIS_URL}/{db}").flushdb()


def _pg_admin(sql: str) -> None:
    import psycopg

    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(sql)  # type: ignore[arg-type]


# -- processes -----------------------------------------------------------------------------------


@dataclass
class Proc:
    name: str
    argv: list[str]
    log: Path
    popen: subprocess.Popen[bytes] | None = None

    def start(self, env: dict[str, str]) -> None:
        with self.log.open("ab") as fh:
            self.popen = subprocess.Popen(
                self.argv, cwd=ROOT, env=env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True
            )

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def stop(self, timeout: float = 15) -> None:
        if not self.alive():
            return
        assert self.popen is not None
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.popen.pid, signal.SIGTERM)
        try:
            self.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.popen.pid, signal.SIGKILL)
            self.popen.wait(timeout=10)

    def tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


@dataclass
class Server:
    """One Clawboard deployment for a benchmark; use as a context manager."""

    mode: str
    workers: int = 2
    threads: int = 4
    tmp: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="clawboard-bench-")))
    port: int = field(default_factory=free_port)
    token: str = ""
    password: str = ""
    env: dict[str, str] = field(default_factory=dict)
    procs: list[Proc] = field(default_factory=list)
    db_name: str = ""
    redis_pair: tuple[int, int] | None = None
    _cookie: str = ""

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def label(self) -> str:
        if self.mode == "embedded":
            return "embedded (SQLite, daphne + in-process worker, 4 threads)"
        return f"scale-out (PostgreSQL + Redis, {self.workers} celery workers x {self.threads} threads, 1 daphne)"

    def __enter__(self) -> Server:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- life cycle -------------------------------------------------------------------------
    def start(self) -> None:
        (self.tmp / "data").mkdir(parents=True, exist_ok=True)
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("DJANGO_", "CELERY_", "CLAWBOARD_"))
            and k not in ("DATABASE_URL", "CHANNEL_LAYER_URL")
        }
        env.update(
            {
                "DATA_DIR": str(self.tmp / "data"),
                "SECRET_KEY": secrets.token_urlsafe(48),
                "ALLOWED_HOSTS": "127.0.0.1,localhost",
                "DJANGO_SETTINGS_MODULE": "zeroclaw_site.settings",
                "DJANGO_DEBUG": "false",
                "SECURE_SSL_REDIRECT": "false",
                "LOG_LEVEL": "WARNING",
                "PYTHONUNBUFFERED": "1",
                "CLAWBOARD_RUN_RATE": "off",  # a load test measures the server, not the throttle
            }
        )
        if self.mode == "scale-out":
            self.db_name = f"clawboard_bench_{os.getpid()}"
            _pg_admin(f'DROP DATABASE IF EXISTS "{self.db_name}" WITH (FORCE)')
            _pg_admin(f'CREATE DATABASE "{self.db_name}"')
            self.redis_pair = _claim_redis_pair()
            env.update(
                {
                    "DATABASE_URL": urlsplit(PG_URL)._replace(path=f"/{self.db_name}").geturl(),
                    "CELERY_BROKER_URL": f"{REDIS_URL}/{self.redis_pair[0]}",
                    "CHANNEL_LAYER_URL": f"{REDIS_URL}/{self.redis_pair[1]}",
                }
            )
        self.env = env
        self.manage("migrate", "--noinput")
        self.password = secrets.token_urlsafe(12)
        out = self.manage("clawboard_user", "bench", "--role", "admin", f"--password={self.password}")
        match = re.search(r"^token: (\S+)$", out, re.M)
        if not match:
            raise RuntimeError(f"clawboard_user printed no token:\n{out}")
        self.token = match.group(1)
        if self.mode == "embedded":
            self._spawn(
                "serve",
                [str(BIN / "python"), "manage.py", "serve", "--host", "127.0.0.1", "--port", str(self.port)],
            )
        else:
            workers = [
                self._spawn(
                    f"worker-{i}",
                    [
                        str(BIN / "celery"),
                        "-A",
                        "zeroclaw_site",
                        "worker",
                        "-P",
                        "threads",
                        "-c",
                        str(self.threads),
                        "--without-mingle",
                        "--without-gossip",
                        "-n",
                        f"bench{i}-{os.getpid()}@%h",
                        "-l",
                        "INFO",
                    ],
                )  # fmt: skip
                for i in range(self.workers)
            ]
            self._spawn(
                "daphne",
                [
                    str(BIN / "daphne"),
                    "-b",
                    "127.0.0.1",
                    "-p",
                    str(self.port),
                    "zeroclaw_site.asgi:application",
                ],
            )
            for proc in workers:
                self._wait_log(proc, re.compile(r"\bready\.$", re.M))
        self._wait_http()

    def stop(self) -> None:
        for proc in self.procs:
            proc.stop()
        if self.db_name:
            with contextlib.suppress(Exception):
                _pg_admin(f'DROP DATABASE IF EXISTS "{self.db_name}" WITH (FORCE)')
        if self.redis_pair is not None:
            _release_redis_pair(self.redis_pair)
            self.redis_pair = None
        shutil.rmtree(self.tmp, ignore_errors=True)

    def manage(self, *args: str, timeout: float = 240) -> str:
        done = subprocess.run(
            [str(BIN / "python"), "manage.py", *args],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if done.returncode != 0:
            raise RuntimeError(f"manage.py {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
        return done.stdout

    def _spawn(self, name: str, argv: list[str]) -> Proc:
        proc = Proc(name=name, argv=argv, log=self.tmp / f"{name}.log")
        self.procs.append(proc)
        proc.start(self.env)
        return proc

    def _wait_log(self, proc: Proc, pattern: re.Pattern[str], timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError):
                if pattern.search(proc.log.read_text(errors="replace")):
                    return
            if not proc.alive():
                raise RuntimeError(f"{proc.name} exited at start-up:\n{proc.tail()}")
            time.sleep(0.1)
        raise RuntimeError(f"{proc.name} not ready after {timeout}s:\n{proc.tail()}")

    def _wait_http(self, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not all(p.alive() for p in self.procs):
                dead = next(p for p in self.procs if not p.alive())
                raise RuntimeError(f"{dead.name} exited at start-up:\n{dead.tail()}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.base_url}/accounts/login/", timeout=2).status_code == 200:
                    return
            time.sleep(0.2)
        raise RuntimeError(f"{self.base_url} does not answer after {timeout}s:\n{self.procs[-1].tail()}")

    def logs(self) -> str:
        return "\n".join(f"---- {p.name}\n{p.tail()}" for p in self.procs)

    # -- clients ----------------------------------------------------------------------------
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Token {self.token}", "Accept": "application/json"}

    def api(self, timeout: float = 330) -> httpx.Client:
        return httpx.Client(base_url=f"{self.base_url}/api/v1", headers=self.headers(), timeout=timeout)

    def async_api(self, connections: int, timeout: float = 330) -> httpx.AsyncClient:
        limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
        return httpx.AsyncClient(
            base_url=f"{self.base_url}/api/v1", headers=self.headers(), timeout=timeout, limits=limits
        )

    def configure(self, doc: dict[str, Any]) -> None:
        with self.api() as api:
            answer = api.post("/config/?prune=true", json=doc)  # the whole configuration
            if answer.status_code != 200:
                raise RuntimeError(f"POST /config/ -> {answer.status_code}: {answer.text[:2000]}")

    def run(self, agent: str, prompt: str, *, wait: float = 300) -> dict[str, Any]:
        """Start a top-level run and wait (server side, then polling) until it is terminal."""
        with self.api() as api:
            answer = api.post("/runs/", json={"agent": agent, "prompt": prompt, "wait": min(wait, 300)})
            if answer.status_code != 201:
                raise RuntimeError(f"POST /runs/ -> {answer.status_code}: {answer.text[:2000]}")
            return self.wait_run(api, answer.json(), wait)

    def wait_run(self, api: httpx.Client, run: dict[str, Any], timeout: float = 300) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while run["status"] not in TERMINAL:
            if time.monotonic() > deadline:
                raise RuntimeError(f"run {run['id']} still {run['status']} after {timeout}s")
            time.sleep(0.05)
            run = api.get(f"/runs/{run['id']}/").json()
        return run

    def events(self, root_id: str) -> list[dict[str, Any]]:
        """The stored event log of a tree, every page."""
        found: list[dict[str, Any]] = []
        after = 0
        with self.api() as api:
            while True:
                page = api.get(f"/runs/{root_id}/events/", params={"after": after, "limit": 5000}).json()
                found.extend(page)
                if len(page) < 5000:
                    return found
                after = int(page[-1]["id"])

    def session_cookie(self) -> str:
        """Log in through the login form; the `sessionid` value. Cookies are handled by hand:
        with DEBUG off they are marked Secure, which a client keeps off plain HTTP."""
        if self._cookie:
            return self._cookie
        with httpx.Client(base_url=self.base_url, timeout=30) as client:
            page = client.get("/accounts/login/")
            match = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
            if not match:
                raise RuntimeError("no CSRF token on the login page")
            csrf = page.cookies.get("csrftoken") or ""
            answer = client.post(
                "/accounts/login/",
                data={"username": "bench", "password": self.password, "csrfmiddlewaretoken": match.group(1)},
                headers={
                    "Cookie": f"csrftoken={csrf}",
                    "Origin": self.base_url,
                    "Referer": f"{self.base_url}/accounts/login/",
                },
            )
            session = answer.cookies.get("sessionid")
            if answer.status_code not in (302, 303) or not session:
                raise RuntimeError(f"login failed: {answer.status_code} {answer.text[:300]}")
            self._cookie = session
            return session

    async def websocket(self, root_id: str, after: int = 0) -> WebSocket:
        return await WebSocket.connect(
            "127.0.0.1",
            self.port,
            f"/ws/runs/{root_id}/?after={after}",
            cookie=f"sessionid={self.session_cookie()}",
            origin=self.base_url,
        )


def servers(modes: list[str], **kwargs: Any) -> list[tuple[str, Server | None, str]]:
    """(mode, an unstarted Server or None, why it is skipped) for each requested mode."""
    out: list[tuple[str, Server | None, str]] = []
    for mode in modes:
        problem = scale_out_problem() if mode == "scale-out" else None
        out.append((mode, None if problem else Server(mode, **kwargs), problem or ""))
    return out


# -- a small asyncio websocket client (RFC 6455 text frames): no extra dependency ----------------


class WebSocket:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.close_code: int | None = None

    @classmethod
    async def connect(cls, host: str, port: int, path: str, *, cookie: str, origin: str) -> WebSocket:
        reader, writer = await asyncio.open_connection(host, port)
        key = base64.b64encode(os.urandom(16)).decode()
        writer.write(
            (
                f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\nOrigin: {origin}\r\n"
                f"Cookie: {cookie}\r\n\r\n"
            ).encode()
        )
        await writer.drain()
        head = await reader.readuntil(b"\r\n\r\n")
        status = head.split(b"\r\n", 1)[0].decode(errors="replace")
        if " 101 " not in f"{status} ":
            writer.close()
            raise RuntimeError(f"websocket handshake for {path} refused: {status}")
        accept = base64.b64encode(
            hashlib.sha1((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest()  # noqa: S324
        )
        if accept not in head:
            raise RuntimeError("bad Sec-WebSocket-Accept")
        return cls(reader, writer)

    async def recv(self) -> str | None:
        """The next text message; None once the server closed."""
        parts: list[bytes] = []
        while True:
            try:
                b1, b2 = await self.reader.readexactly(2)
                length = b2 & 0x7F
                if length == 126:
                    (length,) = struct.unpack("!H", await self.reader.readexactly(2))
                elif length == 127:
                    (length,) = struct.unpack("!Q", await self.reader.readexactly(8))
                mask = await self.reader.readexactly(4) if b2 & 0x80 else b""
                payload = await self.reader.readexactly(length)
            except (asyncio.IncompleteReadError, ConnectionError):
                return None
            if mask:
                payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
            opcode = b1 & 0x0F
            if opcode == 0x8:
                self.close_code = struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else None
                return None
            if opcode == 0x9:
                await self._send(0xA, payload)
                continue
            if opcode in (0x0, 0x1, 0x2):
                parts.append(payload)
                if b1 & 0x80:
                    return b"".join(parts).decode(errors="replace")

    async def _send(self, opcode: int, payload: bytes) -> None:
        mask = os.urandom(4)
        n = len(payload)
        header = bytes([0x80 | opcode])
        if n < 126:
            header += bytes([0x80 | n])
        elif n < 65536:
            header += bytes([0x80 | 126]) + struct.pack("!H", n)
        else:
            header += bytes([0x80 | 127]) + struct.pack("!Q", n)
        self.writer.write(header + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))
        with contextlib.suppress(ConnectionError):
            await self.writer.drain()

    async def send_json(self, value: Any) -> None:
        await self._send(0x1, json.dumps(value).encode())

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self._send(0x8, struct.pack("!H", 1000))
            self.writer.close()
            await asyncio.wait_for(self.writer.wait_closed(), 2)


# -- closed-loop load at a fixed concurrency --------------------------------------------------


@dataclass
class LoadResult:
    concurrency: int
    elapsed: float
    latencies: list[float]
    errors: int
    error_samples: list[str]

    @property
    def requests(self) -> int:
        return len(self.latencies) + self.errors

    @property
    def rps(self) -> float:
        return self.requests / self.elapsed if self.elapsed > 0 else math.nan

    def row(self, name: str) -> list[Any]:
        lat = self.latencies
        return [
            name,
            self.concurrency,
            self.requests,
            f"{self.rps:.1f}",
            ms(pct(lat, 50)),
            ms(pct(lat, 95)),
            ms(pct(lat, 99)),
            f"{100 * self.errors / max(1, self.requests):.1f}",
        ]


LOAD_HEADERS = ["request", "concurrency", "requests", "req/s", "p50 ms", "p95 ms", "p99 ms", "errors %"]


async def closed_loop(
    concurrency: int,
    seconds: float,
    request: Callable[[int, int], Awaitable[str | None]],
) -> LoadResult:
    """`concurrency` clients, each sending its next request when the previous one answered,
    until `seconds` have passed; `request(client, serial)` returns None or an error text.
    Requests in flight at the deadline are waited for and counted."""
    latencies: list[float] = []
    errors: list[str] = []
    deadline = time.perf_counter() + seconds

    async def client(index: int) -> None:
        serial = 0
        while time.perf_counter() < deadline:
            start = time.perf_counter()
            try:
                problem = await request(index, serial)
            except Exception as exc:  # noqa: BLE001 - a transport error is a failed request
                problem = _why(exc)
            serial += 1
            if problem is None:
                latencies.append(time.perf_counter() - start)
            else:
                errors.append(problem)

    start = time.perf_counter()
    await asyncio.gather(*(client(i) for i in range(concurrency)))
    elapsed = time.perf_counter() - start
    samples = sorted(set(errors))[:3]
    return LoadResult(concurrency, elapsed, latencies, len(errors), samples)


# -- configuration documents -------------------------------------------------------------------


def bench_profiles(*, depth: int = 1, max_children: int = 20, max_concurrent_runs: int = 8) -> dict[str, Any]:
    """Risk and runtime profiles that never get in a benchmark's way; `[delegate]` as shipped
    except where given."""
    return {
        "delegate": {
            "timeout_secs": 120,
            "agentic_timeout_secs": 300,
            "max_background": 128,
            "max_concurrent_runs": max_concurrent_runs,
        },
        "risk_profiles": {"bench": {"level": "full", "delegation_policy": {"mode": "allow"}}},
        "runtime_profiles": {
            "bench": {
                "agentic": True,
                "max_tool_iterations": 5000,
                "max_actions_per_hour": 10_000_000,
                "max_cost_per_day_cents": 10_000_000,
                "max_spawn_depth": depth,
                "max_children_per_run": max_children,
            }
        },
    }


def scripted_agent(alias: str, script: list[dict[str, Any]], *, runtime: str = "bench") -> dict[str, Any]:
    """(provider section, agent section) for one agent with its own scripted provider."""
    return {
        "provider": {alias: {"model": f"{alias}-1", "script": script}},
        "agent": {
            alias: {
                "model_provider": f"scripted.{alias}",
                "risk_profile": "bench",
                "runtime_profile": runtime,
            }
        },
    }


def document(agents: list[dict[str, Any]], **profiles: Any) -> dict[str, Any]:
    doc = bench_profiles(**profiles)
    doc["providers"] = {"models": {"scripted": {}}}
    doc["agents"] = {}
    for entry in agents:
        doc["providers"]["models"]["scripted"].update(entry["provider"])
        doc["agents"].update(entry["agent"])
    return doc
