"""The distributed harness: a real Clawboard cluster for the tests of this folder.

One session fixture, `cluster`, starts what `docs/deployment.md` describes, on this machine:
a fresh PostgreSQL database, two Redis databases (Celery broker, channel layer), two
`celery worker` processes (threads pool), one `celery beat` (the reaper, with short periods),
and two `daphne` processes. Every process logs to a file in a temporary folder; the tail of
each log is attached to the report of a failing test. Everything is stopped, and the
database dropped, at the end of the session, even when a test fails.

The tests talk to the cluster the way an operator's script does: REST with a token, and a
websocket opened with a session cookie. They read the shared database directly (psycopg) only
to audit invariants. Nothing here imports Django: this pytest process is a client.

Services: PostgreSQL and Redis on 127.0.0.1 (override with CLAWBOARD_DIST_PG and
CLAWBOARD_DIST_REDIS). Under CI=true an unreachable service fails the session; elsewhere the
tests skip and say why."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
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
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import psycopg
import pytest
import redis

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
PG_URL = os.environ.get("CLAWBOARD_DIST_PG", "postgres://postgres@127.0.0.1:5432/postgres")
REDIS_URL = os.environ.get("CLAWBOARD_DIST_REDIS", "redis://127.0.0.1:6379").rstrip("/")
IN_CI = os.environ.get("CI", "").strip().lower() in ("1", "true", "yes", "on")

# Supervision periods of the cluster: the reaper sweeps every 2 s, a heartbeat older than 4 s
# is stale, a queued run is enqueued again after 5 s, Redis redelivers an unacknowledged
# message after 10 s, and a worker beats every second.
TIMINGS: dict[str, str] = {
    "CLAWBOARD_REAP_SECS": "2",
    "CLAWBOARD_STALE_SECS": "4",
    "CLAWBOARD_REQUEUE_SECS": "5",
    "CLAWBOARD_VISIBILITY_SECS": "10",
    "CLAWBOARD_HEARTBEAT_SECS": "1",
}
# Pairs of Redis databases (broker, channel layer); a session claims a free pair, so two
# sessions on one machine never consume each other's tasks.
REDIS_DB_PAIRS: tuple[tuple[int, int], ...] = ((11, 12), (13, 14), (9, 10))
CLAIM_KEY = "clawboard:distributed-tests:owner"

TERMINAL = frozenset({"completed", "failed", "cancelled", "timed_out", "lost"})
EVENT_TYPES = frozenset(
    {
        "run.queued", "run.started", "run.waiting", "model.request", "model.response", "tool.call",
        "tool.result", "approval.requested", "approval.decided", "run.announce", "run.steered",
        "run.completed", "run.failed", "run.cancelled", "run.timed_out", "run.lost",
    }
)  # fmt: skip


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        item.add_marker(pytest.mark.distributed)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """Attach the tail of every process log to the report of a failing test."""
    report = yield
    if report.failed and _CURRENT is not None:
        report.sections.append(("cluster logs", _CURRENT.log_tails()))
    return report


# --------------------------------------------------------------------------------------------
# services


def _shown(url: str) -> str:
    """A URL fit for a message: without its password."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    return parts._replace(netloc=parts.netloc.replace(f":{parts.password}@", ":***@")).geturl()


def _why(exc: Exception) -> str:
    return f"{exc.__class__.__name__}: {' '.join(str(exc).split())}"


def services_problem() -> str | None:
    """Why the cluster cannot run here, or None."""
    try:
        with psycopg.connect(PG_URL, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except Exception as exc:  # noqa: BLE001 - any failure means "not reachable"
        return f"PostgreSQL is not reachable at {_shown(PG_URL)} ({_why(exc)})"
    try:
        redis.Redis.from_url(f"{REDIS_URL}/0", socket_timeout=3, socket_connect_timeout=3).ping()
    except Exception as exc:  # noqa: BLE001
        return f"Redis is not reachable at {_shown(REDIS_URL)} ({_why(exc)})"
    for tool in ("celery", "daphne"):
        if not (BIN / tool).exists():
            return f"{BIN / tool} is missing (install the project: make install)"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# Routine lines that would push the interesting ones out of a log tail.
ROUTINE = re.compile(
    r"Task runs\.\w+\[[0-9a-f-]+\] (received|succeeded)|Scheduler: Sending due task|\" 20\d "
    r"|^\s*(\.|-{2,}|\*{3,}|\[tasks\]|\[queues\]|\[config\]|celery@|$)"
)


def _tail(path: Path, lines: int = 40) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join([line for line in text.splitlines() if not ROUTINE.search(line)][-lines:])


# --------------------------------------------------------------------------------------------
# processes


@dataclass
class Proc:
    """One child process of the cluster, started by us, stopped by its own pid."""

    name: str
    argv: list[str]
    log: Path
    popen: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0
    log_offset: int = 0

    def start(self, env: dict[str, str]) -> None:
        self.log_offset = self.log.stat().st_size if self.log.exists() else 0
        with self.log.open("ab") as fh:
            fh.write(f"==== start {self.name}: {' '.join(self.argv)}\n".encode())
            fh.flush()
            self.popen = subprocess.Popen(
                self.argv,
                cwd=ROOT,
                env=env,
                stdout=fh,
                stderr=subprocess.STDOUT,
                preexec_fn=_detach_but_die_with_us,
            )
        self.started_at = time.time()

    @property
    def pid(self) -> int:
        assert self.popen is not None
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def kill(self) -> None:
        """SIGKILL: no clean-up, no warm shutdown, no acknowledgement."""
        if self.alive():
            assert self.popen is not None
            os.kill(self.popen.pid, signal.SIGKILL)
            self.popen.wait(timeout=10)

    def stop(self, timeout: float = 15) -> None:
        """SIGTERM (a warm shutdown for celery), then SIGKILL if it does not exit in time."""
        if not self.alive():
            return
        assert self.popen is not None
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.popen.pid, signal.SIGTERM)
        try:
            self.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()

    def new_output(self) -> str:
        try:
            with self.log.open("rb") as fh:
                fh.seek(self.log_offset)
                return fh.read().decode(errors="replace")
        except OSError:
            return ""


def _detach_but_die_with_us() -> None:
    """In the child, before exec: its own session (a Ctrl-C of pytest does not reach it; the
    fixture stops it), and SIGKILL when this pytest process dies, so that no orphan worker
    keeps consuming a later session's tasks."""
    os.setsid()
    if sys.platform.startswith("linux"):
        import ctypes

        pr_set_pdeathsig = 1
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)


class ClusterError(AssertionError):
    pass


@dataclass
class Cluster:
    tmp: Path
    db_name: str
    db_url: str
    broker_db: int
    layer_db: int
    env: dict[str, str]
    token: str = ""
    password: str = ""
    procs: dict[str, Proc] = field(default_factory=dict)
    daphne_ports: list[int] = field(default_factory=list)
    worker_serial: int = 0
    kill_times: list[float] = field(default_factory=list)
    _db: psycopg.Connection[Any] | None = None
    _sessions: dict[int, str] = field(default_factory=dict)

    # -- commands ---------------------------------------------------------------------------
    def manage(self, *args: str, timeout: float = 180) -> str:
        done = subprocess.run(
            [str(BIN / "python"), "manage.py", *args],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if done.returncode != 0:
            raise ClusterError(f"manage.py {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
        return done.stdout

    def _proc(self, name: str, argv: list[str]) -> Proc:
        proc = Proc(name=name, argv=argv, log=self.tmp / "logs" / f"{name}.log")
        self.procs[name] = proc
        return proc

    # -- workers ----------------------------------------------------------------------------
    def workers(self) -> list[Proc]:
        return [p for n, p in self.procs.items() if n.startswith("worker-") and p.alive()]

    def start_worker(self, wait: bool = True) -> Proc:
        self.worker_serial += 1
        n = self.worker_serial
        proc = self._proc(
            f"worker-w{n}",
            [
                str(BIN / "celery"), "-A", "zeroclaw_site", "worker", "-P", "threads", "-c", "4",
                "--without-mingle", "--without-gossip", "-n", f"w{n}@%h", "-l", "INFO",
            ],
        )  # fmt: skip
        proc.start(self.env)
        if wait:
            self.wait_worker_ready(proc)
        return proc

    def wait_worker_ready(self, proc: Proc, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if re.search(r"\bready\.", proc.new_output()):
                return
            if not proc.alive():
                raise ClusterError(f"{proc.name} exited at start-up:\n{_tail(proc.log)}")
            time.sleep(0.1)
        raise ClusterError(f"{proc.name} not ready after {timeout}s:\n{_tail(proc.log)}")

    def kill_worker(self, proc: Proc) -> float:
        """SIGKILL one worker process; returns the wall-clock time of the kill."""
        proc.kill()
        at = time.time()
        self.kill_times.append(at)
        return at

    def worker_for_pid(self, pid: int) -> Proc | None:
        return next((p for p in self.workers() if p.pid == pid), None)

    # -- beat and daphne --------------------------------------------------------------------
    def start_beat(self) -> Proc:
        proc = self._proc(
            "beat",
            [
                str(BIN / "celery"), "-A", "zeroclaw_site", "beat", "-l", "INFO",
                "-s", str(self.tmp / "celerybeat-schedule"), "--max-interval", "1",
            ],
        )  # fmt: skip
        proc.start(self.env)
        return proc

    def start_daphne(self, index: int, extra_env: dict[str, str] | None = None) -> Proc:
        port = self.daphne_ports[index]
        proc = self._proc(
            f"daphne-{index}",
            [str(BIN / "daphne"), "-b", "127.0.0.1", "-p", str(port), "zeroclaw_site.asgi:application"],
        )
        proc.start({**self.env, **(extra_env or {})})
        return proc

    @contextlib.contextmanager
    def extra_daphne(self, extra_env: dict[str, str]) -> Iterator[int]:
        """One more daphne with some environment of its own, for the block; yields its index."""
        self.daphne_ports.append(free_port())
        index = len(self.daphne_ports) - 1
        proc = self.start_daphne(index, extra_env)
        try:
            self.wait_daphne(index)
            yield index
        finally:
            proc.stop()

    def wait_daphne(self, index: int, timeout: float = 60) -> None:
        url = f"{self.base_url(index)}/accounts/login/"
        deadline = time.monotonic() + timeout
        proc = self.procs[f"daphne-{index}"]
        while time.monotonic() < deadline:
            if not proc.alive():
                raise ClusterError(f"{proc.name} exited at start-up:\n{_tail(proc.log)}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(url, timeout=2).status_code == 200:
                    return
            time.sleep(0.2)
        raise ClusterError(f"{proc.name} does not answer {url} after {timeout}s:\n{_tail(proc.log)}")

    def start_all(self) -> None:
        """Start (or start again) the whole cluster: 2 workers, beat, 2 daphne."""
        for i in range(2):
            self.start_daphne(i)
        self.start_beat()
        workers = [self.start_worker(wait=False) for _ in range(2)]
        for w in workers:
            self.wait_worker_ready(w)
        for i in range(2):
            self.wait_daphne(i)

    def stop_all(self, *, hard: bool = False) -> None:
        live = [p for p in self.procs.values() if p.alive()]
        if hard:
            for p in live:
                p.kill()
            self.kill_times.append(time.time())
            return
        threads = [threading.Thread(target=p.stop) for p in live]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    def log_tails(self, lines: int = 40) -> str:
        parts = []
        for name, proc in sorted(self.procs.items()):
            state = "alive" if proc.alive() else f"exited ({proc.popen.returncode if proc.popen else '-'})"
            parts.append(f"---- {name} [{state}] {proc.log}\n{_tail(proc.log, lines)}")
        return "\n".join(parts)

    # -- clients ----------------------------------------------------------------------------
    def base_url(self, index: int = 0) -> str:
        return f"http://127.0.0.1:{self.daphne_ports[index]}"

    def api(self, index: int = 0) -> httpx.Client:
        return httpx.Client(
            base_url=f"{self.base_url(index)}/api/v1",
            headers={"Authorization": f"Token {self.token}", "Accept": "application/json"},
            timeout=60,
        )

    def session_cookie(self, index: int = 1) -> str:
        """Log in through the login form (once per daphne); returns the `sessionid` cookie."""
        if index not in self._sessions:
            self._sessions[index] = self._login(index)
        return self._sessions[index]

    def _login(self, index: int) -> str:
        with httpx.Client(base_url=self.base_url(index), timeout=30) as client:
            page = client.get("/accounts/login/")
            match = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
            assert match, "no CSRF token on the login page"
            answer = client.post(
                "/accounts/login/",
                data={"username": "admin", "password": self.password, "csrfmiddlewaretoken": match.group(1)},
                headers={"Referer": f"{self.base_url(index)}/accounts/login/"},
            )
            assert answer.status_code in (302, 303), f"login failed: {answer.status_code} {answer.text[:300]}"
            session = client.cookies.get("sessionid")
            assert session, "login set no sessionid cookie"
            return session

    def websocket(self, root_id: str, *, after: int | None = None, index: int = 1) -> WsClient:
        path = f"/ws/runs/{root_id}/" + (f"?after={after}" if after is not None else "")
        return WsClient.connect(
            "127.0.0.1",
            self.daphne_ports[index],
            path,
            cookie=f"sessionid={self.session_cookie(index)}",
            origin=self.base_url(index),
        )

    # -- database ---------------------------------------------------------------------------
    def db(self) -> psycopg.Connection[Any]:
        if self._db is None or self._db.closed:
            self._db = psycopg.connect(self.db_url, autocommit=True)
        return self._db

    def q(self, sql: str, params: tuple[Any, ...] | list[Any] = ()) -> list[tuple[Any, ...]]:
        try:
            return self.db().execute(sql, params).fetchall()  # type: ignore[arg-type]
        except psycopg.OperationalError:
            self._db = None  # the server dropped us; one fresh try
            return self.db().execute(sql, params).fetchall()  # type: ignore[arg-type]

    def scalar(self, sql: str, params: tuple[Any, ...] | list[Any] = ()) -> Any:
        return self.q(sql, params)[0][0]

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None


_CURRENT: Cluster | None = None


def _claim_redis_pair() -> tuple[int, int]:
    owner = f"{socket.gethostname()}:{os.getpid()}"
    for broker_db, layer_db in REDIS_DB_PAIRS:
        r = redis.Redis.from_url(f"{REDIS_URL}/{broker_db}")
        current = r.get(CLAIM_KEY)
        if current is not None:
            holder = current.decode() if isinstance(current, bytes) else str(current)
            host, _, pid = holder.partition(":")
            if host == socket.gethostname() and pid.isdigit() and not _pid_alive(int(pid)):
                r.delete(CLAIM_KEY)  # left behind by a session that died
        if r.set(CLAIM_KEY, owner, nx=True, ex=3600):
            for key in r.scan_iter(count=500):
                if key != CLAIM_KEY.encode():
                    r.delete(key)
            redis.Redis.from_url(f"{REDIS_URL}/{layer_db}").flushdb()
            return broker_db, layer_db
    raise ClusterError(f"every Redis database pair {REDIS_DB_PAIRS} is in use by another test session")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _release_redis_pair(broker_db: int, layer_db: int) -> None:
    with contextlib.suppress(redis.RedisError):
        redis.Redis.from_url(f"{REDIS_URL}/{layer_db}").flushdb()
        redis.Redis.from_url(f"{REDIS_URL}/{broker_db}").flushdb()


def _drop_orphan_databases() -> None:
    """Drop the databases of earlier sessions on this machine whose pytest process is gone."""
    if urlsplit(PG_URL).hostname not in ("127.0.0.1", "localhost", "::1"):
        return
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        names = [
            r[0]
            for r in conn.execute("SELECT datname FROM pg_database WHERE datname LIKE 'clawboard_dist_%'")
        ]
        for name in names:
            pid = name.removeprefix("clawboard_dist_")
            if pid.isdigit() and int(pid) != os.getpid() and not _pid_alive(int(pid)):
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')  # type: ignore[arg-type]


def _admin(conn_url: str, sql: str) -> None:
    with psycopg.connect(conn_url, autocommit=True) as conn:
        conn.execute(sql)  # type: ignore[arg-type]


@pytest.fixture(scope="session")
def cluster(request: pytest.FixtureRequest) -> Iterator[Cluster]:
    global _CURRENT
    problem = services_problem()
    if problem:
        if IN_CI:
            pytest.fail(f"CI=true and the distributed services are unavailable: {problem}", pytrace=False)
        pytest.skip(f"distributed tests need PostgreSQL and Redis on 127.0.0.1: {problem}")

    _drop_orphan_databases()
    tmp = Path(tempfile.mkdtemp(prefix="clawboard-dist-"))
    (tmp / "logs").mkdir()
    (tmp / "data").mkdir()
    db_name = f"clawboard_dist_{os.getpid()}"
    parts = urlsplit(PG_URL)
    db_url = parts._replace(path=f"/{db_name}").geturl()
    _admin(PG_URL, f'DROP DATABASE IF EXISTS "{db_name}" WITH (FORCE)')
    _admin(PG_URL, f'CREATE DATABASE "{db_name}"')
    broker_db, layer_db = _claim_redis_pair()

    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "CELERY_", "CLAWBOARD_"))}
    env.update(
        {
            "DATABASE_URL": db_url,
            "CELERY_BROKER_URL": f"{REDIS_URL}/{broker_db}",
            "CHANNEL_LAYER_URL": f"{REDIS_URL}/{layer_db}",
            "DATA_DIR": str(tmp / "data"),
            "SECRET_KEY": secrets.token_urlsafe(48),
            "ALLOWED_HOSTS": "127.0.0.1,localhost",
            "DJANGO_SETTINGS_MODULE": "zeroclaw_site.settings",
            "LOG_LEVEL": "WARNING",
            "PYTHONUNBUFFERED": "1",
            **TIMINGS,
        }
    )
    env.pop("DATABASE_URL_TEST", None)
    c = Cluster(tmp=tmp, db_name=db_name, db_url=db_url, broker_db=broker_db, layer_db=layer_db, env=env)
    c.daphne_ports = [free_port(), free_port()]
    _CURRENT = c
    failed_before = request.session.testsfailed
    try:
        c.manage("migrate", "--noinput")
        c.password = secrets.token_urlsafe(12)
        out = c.manage("clawboard_user", "admin", "--role", "admin", f"--password={c.password}")
        match = re.search(r"^token: (\S+)$", out, re.M)
        assert match, f"clawboard_user printed no token:\n{out}"
        c.token = match.group(1)
        c.start_all()
        yield c
    except BaseException:
        sys.stderr.write(f"\ncluster failed; logs:\n{c.log_tails()}\n")
        raise
    finally:
        failed = request.session.testsfailed > failed_before
        c.stop_all()
        c.close()
        _release_redis_pair(broker_db, layer_db)
        with contextlib.suppress(psycopg.Error):
            _admin(PG_URL, f'DROP DATABASE IF EXISTS "{db_name}" WITH (FORCE)')
        if failed or os.environ.get("CLAWBOARD_DIST_KEEP"):
            sys.stderr.write(f"\ndistributed cluster logs kept in {tmp / 'logs'}\n")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
        _CURRENT = None


# --------------------------------------------------------------------------------------------
# a small websocket client (RFC 6455, text frames), so the suite needs no extra dependency


class WsClosed(Exception):
    pass


class WsClient:
    """Connects, reads frames on a thread, keeps every JSON message, answers pings."""

    def __init__(self, sock: socket.socket, leftover: bytes) -> None:
        self.sock = sock
        self.buf = leftover
        self.messages: list[Any] = []
        self.closed = False
        self.close_code: int | None = None
        self.cond = threading.Condition()
        self.send_lock = threading.Lock()
        self.reader = threading.Thread(target=self._read_loop, name="ws-reader", daemon=True)
        self.reader.start()

    @classmethod
    def connect(cls, host: str, port: int, path: str, *, cookie: str, origin: str) -> WsClient:
        sock = socket.create_connection((host, port), timeout=15)
        key = base64.b64encode(os.urandom(16)).decode()
        request = (
            f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\nOrigin: {origin}\r\n"
            f"Cookie: {cookie}\r\n\r\n"
        )
        sock.sendall(request.encode())
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(4096)
            if not chunk:
                raise WsClosed(f"websocket handshake for {path}: connection closed ({data[:200]!r})")
            data += chunk
        head, _, rest = data.partition(b"\r\n\r\n")
        status = head.split(b"\r\n", 1)[0].decode(errors="replace")
        if " 101 " not in f"{status} ":
            raise WsClosed(f"websocket handshake for {path} refused: {status}")
        expected = base64.b64encode(
            hashlib.sha1((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest()  # noqa: S324
        ).decode()
        assert expected.encode() in head, "bad Sec-WebSocket-Accept"
        sock.settimeout(None)
        return cls(sock, rest)

    def _recv_exact(self, n: int) -> bytes:
        while len(self.buf) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise WsClosed("connection closed")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def _read_frame(self) -> tuple[bool, int, bytes]:
        b1, b2 = self._recv_exact(2)
        fin, opcode, masked, length = bool(b1 & 0x80), b1 & 0x0F, bool(b2 & 0x80), b2 & 0x7F
        if length == 126:
            (length,) = struct.unpack("!H", self._recv_exact(2))
        elif length == 127:
            (length,) = struct.unpack("!Q", self._recv_exact(8))
        mask = self._recv_exact(4) if masked else b""
        payload = self._recv_exact(length)
        if masked:
            payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        return fin, opcode, payload

    def _read_loop(self) -> None:
        parts: list[bytes] = []
        try:
            while True:
                fin, opcode, payload = self._read_frame()
                if opcode == 0x8:
                    self.close_code = struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else None
                    break
                if opcode == 0x9:
                    self._send(0xA, payload)
                    continue
                if opcode in (0x1, 0x2, 0x0):
                    parts.append(payload)
                    if fin:
                        text = b"".join(parts).decode(errors="replace")
                        parts = []
                        try:
                            message: Any = json.loads(text)
                        except ValueError:
                            message = text
                        with self.cond:
                            self.messages.append(message)
                            self.cond.notify_all()
        except (OSError, WsClosed):
            pass
        finally:
            with self.cond:
                self.closed = True
                self.cond.notify_all()

    def _send(self, opcode: int, payload: bytes) -> None:
        mask = os.urandom(4)
        header = bytes([0x80 | opcode])
        n = len(payload)
        if n < 126:
            header += bytes([0x80 | n])
        elif n < 65536:
            header += bytes([0x80 | 126]) + struct.pack("!H", n)
        else:
            header += bytes([0x80 | 127]) + struct.pack("!Q", n)
        body = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        with self.send_lock, contextlib.suppress(OSError):
            self.sock.sendall(header + mask + body)

    def send_json(self, value: Any) -> None:
        self._send(0x1, json.dumps(value).encode())

    def close(self) -> None:
        self._send(0x8, struct.pack("!H", 1000))
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        self.reader.join(timeout=5)

    def events(self) -> list[dict[str, Any]]:
        """Every run event carried by the messages received so far, in arrival order."""
        with self.cond:
            messages = list(self.messages)
        found: list[dict[str, Any]] = []
        for m in messages:
            found.extend(extract_events(m))
        return found

    def ids(self) -> set[int]:
        return {int(e["id"]) for e in self.events()}

    def wait_for_ids(self, wanted: set[int] | list[int], timeout: float) -> bool:
        """Wait until every one of these event ids has arrived (or the socket closed)."""
        target = set(wanted)
        return self.wait(lambda w: target <= w.ids(), timeout)

    def wait(self, predicate: Callable[[WsClient], bool], timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        with self.cond:
            while not predicate(self):
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self.closed:
                    return predicate(self)
                self.cond.wait(min(remaining, 0.5))
        return True


def extract_events(message: Any) -> list[dict[str, Any]]:
    """Run events inside one websocket message, whatever envelope the consumer uses
    (a bare event, `{"event": {...}}`, `{"events": [...]}`, a snapshot holding events)."""
    if isinstance(message, list):
        return [e for m in message for e in extract_events(m)]
    if not isinstance(message, dict):
        return []
    if message.get("type") in EVENT_TYPES and "id" in message and "run_id" in message:
        return [message]
    found: list[dict[str, Any]] = []
    for key in ("event", "events", "snapshot", "data", "missed"):
        if key in message:
            found.extend(extract_events(message[key]))
    return found


# --------------------------------------------------------------------------------------------
# configuration and runs

BASE_TOML = """
[delegate]
timeout_secs = 120
agentic_timeout_secs = 300
max_background = 128
max_concurrent_runs = 8

[risk_profiles.team]
allowed_commands = ["*"]
require_approval_for_medium_risk = false
[risk_profiles.team.delegation_policy]
mode = "allow"

[runtime_profiles.roomy]
agentic = true
max_tool_iterations = 10
max_actions_per_hour = 100000
max_cost_per_day_cents = 100000
max_children_per_run = 20

[runtime_profiles.oneshot]
agentic = false
max_actions_per_hour = 100000
"""


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {toml_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"cannot render {value!r} as TOML")


def provider(alias: str, script: list[dict[str, Any]]) -> str:
    return f"[providers.models.scripted.{alias}]\nmodel = {toml_value(alias + '-1')}\nscript = {toml_value(script)}\n"


def agent(
    alias: str, model_provider: str, *, risk: str = "team", runtime: str = "roomy", **fields: Any
) -> str:
    lines = [
        f"[agents.{alias}]",
        f"model_provider = {toml_value(model_provider)}",
        f"risk_profile = {toml_value(risk)}",
        f"runtime_profile = {toml_value(runtime)}",
    ]
    lines += [f"{k} = {toml_value(v)}" for k, v in fields.items()]
    return "\n".join(lines) + "\n"


def load_config(c: Cluster, toml_text: str) -> None:
    """Replace the whole configuration through REST (POST /api/v1/config/, application/toml)."""
    with c.api(0) as api:
        answer = api.post(
            # prune: an import keeps what the file lacks unless told to replace everything
            "/config/?prune=true",
            content=(BASE_TOML + toml_text).encode(),
            headers={"Content-Type": "application/toml"},
        )
    assert answer.status_code == 200, f"config import failed: {answer.status_code} {answer.text[:2000]}"


def start_run(c: Cluster, agent_alias: str, prompt: str, *, index: int = 0) -> str:
    with c.api(index) as api:
        answer = api.post("/runs/", json={"agent": agent_alias, "prompt": prompt, "wait": 0})
    assert answer.status_code in (200, 201, 202), f"POST /runs/: {answer.status_code} {answer.text[:1000]}"
    return str(answer.json()["id"])


def tree_ids(c: Cluster, root_id: str) -> list[str]:
    return [str(r[0]) for r in c.q("SELECT id FROM runs_app_run WHERE root_id = %s", (root_id,))]


def statuses(c: Cluster, root_ids: list[str]) -> dict[str, str]:
    rows = c.q("SELECT id, status FROM runs_app_run WHERE root_id = ANY(%s::uuid[])", (root_ids,))
    return {str(r[0]): r[1] for r in rows}


def wait_terminal(c: Cluster, root_ids: list[str], timeout: float) -> dict[str, str]:
    """Wait until every run of these trees is terminal; returns id -> status."""
    deadline = time.monotonic() + timeout
    while True:
        now = statuses(c, root_ids)
        if now and all(s in TERMINAL for s in now.values()):
            return now
        if time.monotonic() > deadline:
            active = {k: v for k, v in now.items() if v not in TERMINAL}
            raise AssertionError(f"runs still active after {timeout}s: {describe(c, list(active))}")
        time.sleep(0.2)


def describe(c: Cluster, run_ids: list[str]) -> str:
    """A readable dump of some runs, their pending tool calls and their last events."""
    lines = []
    for rid in run_ids[:20]:
        row = c.q(
            "SELECT agent, kind, execution, status, owner, heartbeat_at, parent_id, error, created_at "
            "FROM runs_app_run WHERE id = %s",
            (rid,),
        )
        calls = c.q(
            "SELECT id, name, status, wait_kind FROM runs_app_toolcall WHERE run_id = %s ORDER BY id", (rid,)
        )
        evs = c.q("SELECT id, type FROM runs_app_runevent WHERE run_id = %s ORDER BY id", (rid,))
        lines.append(f"{rid}: {row[0] if row else '?'}\n    calls={calls}\n    events={evs[-12:]}")
    return "\n".join(lines)


def db_events(c: Cluster, root_id: str) -> list[tuple[int, str, str, dict[str, Any]]]:
    """(id, run_id, type, data) of a tree's events, in id order."""
    rows = c.q(
        "SELECT id, run_id, type, data FROM runs_app_runevent WHERE root_id = %s ORDER BY id", (root_id,)
    )
    return [(int(r[0]), str(r[1]), str(r[2]), r[3]) for r in rows]


def audit_trees(c: Cluster, root_ids: list[str]) -> list[str]:
    """The invariants every finished tree must hold (ENGINE.md). Returns violations."""
    problems: list[str] = []
    roots = list(root_ids)
    runs = c.q(
        "SELECT id, status, parent_id, parent_call_id, execution, kind, via_api FROM runs_app_run "
        "WHERE root_id = ANY(%s::uuid[])",
        (roots,),
    )
    status = {str(r[0]): r[1] for r in runs}
    for rid, st in status.items():
        if st not in TERMINAL:
            problems.append(f"run {rid} is still {st}")
    # A step that raised (a deadlock, a bug) ends its run `failed` with "internal error: ...".
    crashed = c.q(
        "SELECT id, error FROM runs_app_run WHERE root_id = ANY(%s::uuid[]) AND error LIKE 'internal error%%'",
        (roots,),
    )
    for rid, error in crashed:
        problems.append(f"run {rid} crashed: {str(error)[:300]}")
    # Exactly one terminal event per run, naming its final status; nothing after it on that run
    # except the settling of its own tool calls (tool.result) by children that end later.
    rows = c.q(
        "SELECT run_id, type, id FROM runs_app_runevent WHERE root_id = ANY(%s::uuid[]) ORDER BY id", (roots,)
    )
    terminal_events: dict[str, list[str]] = {}
    after_terminal: dict[str, list[str]] = {}
    for run_id, type_, _ in rows:
        rid = str(run_id)
        if type_.removeprefix("run.") in TERMINAL:
            terminal_events.setdefault(rid, []).append(type_)
        elif rid in terminal_events and type_ not in ("tool.result",):
            after_terminal.setdefault(rid, []).append(type_)
    for rid, st in status.items():
        got = terminal_events.get(rid, [])
        if got != [f"run.{st}"] and st in TERMINAL:
            problems.append(f"run {rid} ({st}) has terminal events {got}")
    for rid, types in after_terminal.items():
        problems.append(f"run {rid} has events after its terminal event: {types}")
    dup = c.q(
        "SELECT id, count(*) FROM runs_app_runevent WHERE root_id = ANY(%s::uuid[]) GROUP BY id HAVING count(*) > 1",
        (roots,),
    )
    if dup:
        problems.append(f"duplicate event rows: {dup}")
    # Every tool call that waits on children is done once all of them ended.
    stuck = c.q(
        "SELECT tc.id, tc.run_id, tc.name, tc.wait_kind FROM runs_app_toolcall tc "
        "JOIN runs_app_run r ON r.id = tc.run_id WHERE r.root_id = ANY(%s::uuid[]) AND tc.status = 'pending' "
        "AND EXISTS (SELECT 1 FROM runs_app_run ch WHERE ch.parent_call_id = tc.id) "
        "AND NOT EXISTS (SELECT 1 FROM runs_app_run ch WHERE ch.parent_call_id = tc.id "
        "AND ch.status NOT IN ('completed','failed','cancelled','timed_out','lost'))",
        (roots,),
    )
    for call_id, run_id, name, wait_kind in stuck:
        problems.append(
            f"tool call {call_id} ({name}/{wait_kind}) of run {run_id} is pending though its children ended"
        )
    # Each done tool call has exactly one tool.result event.
    results = c.q(
        "SELECT tc.id, tc.call_id, tc.run_id, (SELECT count(*) FROM runs_app_runevent e WHERE e.run_id = tc.run_id "
        "AND e.type = 'tool.result' AND e.data->>'call_id' = tc.call_id) FROM runs_app_toolcall tc "
        "JOIN runs_app_run r ON r.id = tc.run_id WHERE r.root_id = ANY(%s::uuid[]) AND tc.status = 'done'",
        (roots,),
    )
    for call_pk, call_id, run_id, n in results:
        if n != 1:
            problems.append(f"tool call {call_pk} ({call_id}) of run {run_id} has {n} tool.result events")
    # Announces: at most one per child, as a row, as an event, and in the parent's transcript.
    announces = c.q(
        "SELECT ch.id, ch.session_key, ch.parent_id, "
        "(SELECT count(*) FROM runs_app_announce a WHERE a.child_id = ch.id), "
        "(SELECT count(*) FROM runs_app_runevent e WHERE e.type = 'run.announce' AND e.data->>'child_id' = ch.id::text), "
        "(SELECT count(*) FROM runs_app_message m WHERE m.run_id = ch.parent_id "
        "AND m.content LIKE '[Subagent completion]%%' AND position(ch.session_key in m.content) > 0) "
        "FROM runs_app_run ch WHERE ch.root_id = ANY(%s::uuid[]) AND ch.execution = 'background'",
        (roots,),
    )
    for child_id, _key, parent_id, rows_n, events_n, messages_n in announces:
        if rows_n > 1 or events_n > 1 or messages_n > 1:
            problems.append(
                f"child {child_id} announced to {parent_id}: {rows_n} rows, {events_n} events, {messages_n} messages"
            )
        if events_n != rows_n:
            problems.append(f"child {child_id}: {rows_n} announce rows but {events_n} run.announce events")
    return problems


EventRow = tuple[int, str, str, dict[str, Any]]


def check_stream(received: list[dict[str, Any]], expected: list[EventRow], label: str) -> list[str]:
    """A websocket stream against the tree's event log: ids strictly increasing (so
    `after=<last id>` is a safe resume point), no event twice, every event present."""
    problems: list[str] = []
    ids = [int(e["id"]) for e in received]
    expected_ids = [row[0] for row in expected]
    seen: set[int] = set()
    dups = sorted({i for i in ids if i in seen or seen.add(i)})  # type: ignore[func-returns-value]
    if dups:
        problems.append(f"{label}: events received twice: {dups[:20]}")
    backwards = [(a, b) for a, b in zip(ids, ids[1:], strict=False) if b <= a and b not in dups]
    if backwards:
        problems.append(
            f"{label}: event ids out of order (a later message carried a smaller id): {backwards[:10]}"
        )
    got = set(ids)
    missing = [row for row in expected if row[0] not in got]
    if missing:
        problems.append(f"{label}: {len(missing)} of {len(expected)} events never arrived:")
        position = {row[0]: i for i, row in enumerate(expected)}
        for event_id, run_id, type_, _ in missing[:10]:
            i = position[event_id]
            around = [
                f"{row[0]}{'' if row[0] in got else '(missing)'}" for row in expected[max(0, i - 2) : i + 3]
            ]
            problems.append(f"    {event_id} {type_} of run {run_id}; the tree's ids around it: {around}")
    extra = sorted(got - set(expected_ids))
    if extra:
        problems.append(f"{label}: events that are not in the database: {extra[:20]}")
    return problems


@dataclass
class Watched:
    """A tree started through REST, with a websocket on the other daphne following it."""

    root_id: str
    ws: WsClient


def watch(c: Cluster, root_id: str, *, after: int = 0) -> Watched:
    return Watched(root_id, c.websocket(root_id, after=after, index=1))


def start_watched(c: Cluster, agent_alias: str, prompt: str) -> Watched:
    """Start a run through daphne 0 and follow its tree over a websocket on daphne 1."""
    return watch(c, start_run(c, agent_alias, prompt, index=0))


def settle_watched(c: Cluster, trees: list[Watched], timeout: float = 60) -> list[str]:
    """Wait until every tree is terminal, then check each websocket stream against the
    database: every event arrived, once, in increasing id order. Returns the problems (a tree
    still active after `timeout` is one, described with its pending tool calls)."""
    problems: list[str] = []
    try:
        wait_terminal(c, [t.root_id for t in trees], timeout)
    except AssertionError as exc:
        problems.append(str(exc))
    for t in trees:
        expected = db_events(c, t.root_id)
        t.ws.wait_for_ids([e[0] for e in expected], timeout=10)
        t.ws.close()
        problems += check_stream(t.ws.events(), expected, f"websocket of tree {t.root_id}")
    problems += audit_trees(c, [t.root_id for t in trees])
    return problems


def fail_on(problems: list[str]) -> None:
    """Fail with the list of violations (readable, without the test's source)."""
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)


def run_row(c: Cluster, run_id: str) -> dict[str, Any]:
    cur = c.db().execute("SELECT * FROM runs_app_run WHERE id = %s", (run_id,))
    row = cur.fetchone()
    assert row is not None, f"no run {run_id}"
    names = [d.name for d in cur.description or []]
    return dict(zip(names, row, strict=True))


def children_of(c: Cluster, run_id: str) -> list[dict[str, Any]]:
    cur = c.db().execute("SELECT * FROM runs_app_run WHERE parent_id = %s ORDER BY created_at, id", (run_id,))
    names = [d.name for d in cur.description or []]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def transcript(c: Cluster, run_id: str) -> list[tuple[str, str]]:
    rows = c.q("SELECT role, content FROM runs_app_message WHERE run_id = %s ORDER BY seq", (run_id,))
    return [(str(r[0]), str(r[1])) for r in rows]
