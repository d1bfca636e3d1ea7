"""`shell` inside bubblewrap (issue 15): each bypass of the textual checks, tried for real.

The profile is as lenient as the textual gate allows (`allowed_commands = ["*"]`, high-risk
patterns off) so that what holds is the sandbox. Every test looks at the file system, the
processes or the output itself: a file outside stays unchanged or absent, and nothing outside
is read."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from policies_app.specs import RiskProfileSpec, RuntimeProfileSpec
from runs_app.engine.tools import sandbox
from runs_app.engine.tools.base import LocalToolContext
from runs_app.engine.tools.files import file_list, file_read, file_write
from runs_app.engine.tools.paths import open_at, open_base, resolve_access
from runs_app.engine.tools.shell import MAX_COMMAND_BYTES, shell

SECRET = "canary-7f3a9c-never-leaves"

pytestmark = pytest.mark.skipif(
    not sandbox.status().available and os.environ.get("CI") != "true", reason=sandbox.status().detail
)


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory next to the workspace that no profile here grants: the attacker's target."""
    directory = tmp_path / "outside"
    directory.mkdir()
    (directory / "secret.txt").write_text(SECRET)
    return directory


def context(
    tmp_path: Path,
    *,
    timeout: int = 10,
    env: dict[str, str] | None = None,
    runtime: dict[str, int] | None = None,
    **risk: object,
) -> LocalToolContext:
    risk.setdefault("forbidden_paths", (str(tmp_path),))
    risk.setdefault("allowed_commands", ("*",))
    risk.setdefault("block_high_risk_commands", False)
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    return LocalToolContext(
        risk=RiskProfileSpec(alias="test", **risk),  # type: ignore[arg-type]
        runtime=RuntimeProfileSpec(alias="test", shell_timeout_secs=timeout, **(runtime or {})),  # type: ignore[arg-type]
        workspace=workspace,
        env={"PATH": os.environ["PATH"]} if env is None else env,
    )


def run(ctx: LocalToolContext, command: str) -> tuple[bool, str, str | None]:
    result = shell(ctx, {"command": command})
    return result.success, result.output, result.error


def unchanged(outside: Path) -> None:
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert (outside / "secret.txt").read_text() == SECRET


# --- redirections to /dev/fd, /proc/self/fd, /dev/stdout ---------------------------------------


@pytest.fixture
def read_only_root(tmp_path: Path) -> Path:
    root = tmp_path / "docs"
    root.mkdir()
    (root / "guide.txt").write_text("original")
    return root


@pytest.mark.parametrize(
    "command",
    [
        "echo pwned 3< {root}/guide.txt > /dev/fd/3",
        "echo pwned 3< {root}/guide.txt >> /dev/fd/3",
        "echo pwned 1< {root}/guide.txt > /dev/stdout",
        "python3 -c \"open('/proc/self/fd/3', 'w').write('pwned')\" 3< {root}/guide.txt",
        "python3 -c \"open('/dev/fd/0', 'w').write('pwned')\" < {root}/guide.txt",
    ],
)
def test_a_descriptor_opened_for_reading_cannot_be_reopened_for_writing(
    tmp_path: Path, read_only_root: Path, command: str
) -> None:
    ctx = context(tmp_path, allowed_roots_read_only=(str(read_only_root),))

    ok, _, _ = run(ctx, command.format(root=read_only_root))

    assert not ok
    assert (read_only_root / "guide.txt").read_text() == "original"


def test_the_read_only_root_is_readable_but_not_writable_by_any_program(
    tmp_path: Path, read_only_root: Path
) -> None:
    ctx = context(tmp_path, allowed_roots_read_only=(str(read_only_root),))

    assert run(ctx, f"cat {read_only_root}/guide.txt") == (True, "original", None)
    ok, output, _ = run(ctx, f"python3 -c \"open('{read_only_root}/guide.txt', 'w')\"")
    assert not ok and "Read-only file system" in output
    assert (read_only_root / "guide.txt").read_text() == "original"


def test_a_forbidden_directory_inside_the_workspace_is_empty_and_cannot_be_written(tmp_path: Path) -> None:
    ctx = context(tmp_path, forbidden_paths=(str(tmp_path), "private"))
    private = ctx.workspace / "private"
    private.mkdir()
    (private / "key").write_text(SECRET)

    outputs = [
        run(ctx, "ls -a private"),
        run(ctx, "cat private/key"),
        run(ctx, "python3 -c \"open('private/key', 'w').write('pwned')\""),
        run(ctx, "python3 -c \"open('private/new', 'w').write('pwned')\""),
    ]

    assert outputs[0] == (True, ".\n..\n", None)
    assert all(SECRET not in output for _, output, _ in outputs)
    assert sorted(p.name for p in private.iterdir()) == ["key"]
    assert (private / "key").read_text() == SECRET


# --- secrets ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        "env",
        "cat /proc/self/environ",
        "cat /proc/$PPID/environ",
        "cat /proc/1/environ",
        "cat /proc/*/environ",
    ],
)
def test_the_servers_environment_never_reaches_the_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    monkeypatch.setenv("CLAWBOARD_TEST_API_KEY", SECRET)
    ctx = context(tmp_path, env=dict(os.environ))  # what the run loop passes

    ok, output, _ = run(ctx, command)

    assert ok, output
    assert "PATH=/usr/local/bin:/usr/bin:/bin" in output
    assert SECRET not in output and "CLAWBOARD_TEST_API_KEY" not in output


def test_the_servers_processes_are_not_visible(tmp_path: Path) -> None:
    ctx = context(tmp_path)

    ok, listing, _ = run(ctx, "ls /proc")
    assert ok
    pids = {int(name) for name in listing.split() if name.isdigit()}
    assert os.getpid() not in pids and len(pids) < 10
    ok, output, _ = run(ctx, f"cat /proc/{os.getpid()}/environ")
    assert not ok and "No such file" in output


def test_the_servers_etc_is_not_there(tmp_path: Path) -> None:
    ctx = context(tmp_path)

    ok, listing, _ = run(ctx, "ls /etc")

    assert ok
    assert "shadow" not in listing.split() and "hostname" not in listing.split()
    for secret in ("/etc/shadow", "/etc/ssl/private"):
        ok, output, _ = run(ctx, f"ls {secret}")
        assert not ok and "No such file" in output, secret
    assert "private" not in run(ctx, "ls /etc/ssl")[1].split()
    assert run(ctx, "cat /etc/passwd")[1].count("\n") == 1  # the sandbox's own user only


# --- `..`, symlinks and hard links out of the workspace -----------------------------------------


def test_dot_dot_and_absolute_paths_outside_do_not_exist(tmp_path: Path, outside: Path) -> None:
    ctx = context(tmp_path)

    for command in (
        "cat ../outside/secret.txt",
        f"cat {outside}/secret.txt",
        "ls ..",
        "touch ../outside/new",
    ):
        _, output, _ = run(ctx, command)
        assert SECRET not in output
    unchanged(outside)


def test_a_symlink_the_agent_made_in_one_call_leads_nowhere_in_the_next(
    tmp_path: Path, outside: Path
) -> None:
    ctx = context(tmp_path)

    assert run(ctx, f"ln -s {outside} escape && ln -s {outside}/secret.txt link")[0]
    calls = [
        run(ctx, "cat escape/secret.txt"),
        run(ctx, "cat link"),
        run(ctx, "python3 -c \"open('escape/pwned', 'w').write('x')\""),
        run(ctx, "python3 -c \"open('link', 'w').write('pwned')\""),
    ]
    assert all(not ok and SECRET not in output for ok, output, _ in calls)
    # The file tools judge the link by where it points, and refuse.
    assert (
        file_read(ctx, {"path": "escape/secret.txt"}).error
        == "Path 'escape/secret.txt' is forbidden by policy"
    )
    assert file_read(ctx, {"path": "link"}).error == "Path 'link' is forbidden by policy"
    assert file_write(ctx, {"path": "escape/pwned", "content": "x"}).success is False
    assert file_list(ctx, {"path": "escape"}).success is False
    unchanged(outside)


@pytest.mark.parametrize("openat2", [True, False], ids=["openat2", "component-walk"])
def test_a_symlink_swapped_in_after_the_check_is_not_followed(
    tmp_path: Path, outside: Path, monkeypatch: pytest.MonkeyPatch, openat2: bool
) -> None:
    from runs_app.engine.tools import paths

    monkeypatch.setattr(paths, "_has_openat2", openat2)  # False: the walk of kernels before 5.6
    ctx = context(tmp_path)
    (ctx.workspace / "sub").mkdir()
    (ctx.workspace / "sub" / "secret.txt").write_text("mine")
    access = resolve_access(ctx, "sub/secret.txt", for_write=False)

    # Between the check and the open, the agent swaps the directory for a link to outside.
    (ctx.workspace / "sub" / "secret.txt").unlink()
    (ctx.workspace / "sub").rmdir()
    (ctx.workspace / "sub").symlink_to(outside)

    base = open_base(access.base)
    try:
        with pytest.raises(OSError) as caught:
            open_at(base, access.relative, os.O_RDONLY)
    finally:
        os.close(base)
    assert caught.value.errno in (40, 18)  # ELOOP, EXDEV
    unchanged(outside)


def test_hard_links_to_files_outside_cannot_be_made_or_written_through(
    tmp_path: Path, outside: Path, read_only_root: Path
) -> None:
    ctx = context(tmp_path, allowed_roots_read_only=(str(read_only_root),))

    assert not run(ctx, f"ln {outside}/secret.txt hard")[0]
    ok, output, _ = run(ctx, f"ln {read_only_root}/guide.txt hard")
    assert not ok and "Invalid cross-device link" in output
    assert not (ctx.workspace / "hard").exists()
    # A hard link that exists already (made on the host): file_write replaces the workspace's
    # name, the file outside keeps its content.
    os.link(outside / "secret.txt", ctx.workspace / "planted")
    assert file_write(ctx, {"path": "planted", "content": "pwned"}).success
    assert (ctx.workspace / "planted").read_text() == "pwned"
    assert (outside / "secret.txt").read_text() == SECRET


# --- options of allowed programs that run or write things --------------------------------------


@pytest.fixture
def outside_repo(outside: Path) -> Iterator[Path]:
    repo = outside / "repo"
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(repo)]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "notes.txt").write_text(SECRET)
    subprocess.run([*git, "add", "notes.txt"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", SECRET], check=True)
    yield repo


def _git_state(repo: Path) -> tuple[str, list[str]]:
    head = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    )
    return head.stdout, sorted(p.name for p in repo.iterdir())


# `ran` marks commands whose payload really runs (it prints "payload-ran"): what holds there is
# the sandbox, not a refusal. A pager only starts on a terminal, and the sandbox has none.
PAYLOAD = "echo payload-ran >&2; touch {o}/pwned; cat {o}/secret.txt"


@pytest.mark.parametrize(
    ("command", "ran"),
    [
        (f"git -c alias.x='!{PAYLOAD}' x", True),
        (f"git init -q . ; git -c core.fsmonitor='{PAYLOAD}; false' status", True),
        (
            f"git init -q . ; git -c user.name=a -c user.email=a@a -c core.editor='{PAYLOAD}; true' commit --allow-empty",
            True,
        ),
        (f"git init -q . ; git -c core.pager='{PAYLOAD}' -p log", False),
        (f"git init -q . ; git -c core.sshCommand='{PAYLOAD}' fetch ssh://example.invalid/x", True),
        ("git -C {o}/repo log", False),
        ("git -C {o}/repo rm -q notes.txt", False),
        ("git --git-dir={o}/repo/.git --work-tree={o}/repo log -p", False),
    ],
)
def test_git_options_cannot_reach_outside(
    tmp_path: Path, outside: Path, outside_repo: Path, command: str, ran: bool
) -> None:
    ctx = context(tmp_path, allowed_commands=("git",))
    before = _git_state(outside_repo)

    _, output, _ = run(ctx, command.format(o=outside))

    assert ("payload-ran" in output) == ran, output
    assert SECRET not in output
    assert not (outside / "pwned").exists()
    assert _git_state(outside_repo) == before
    assert (outside_repo / "notes.txt").read_text() == SECRET


@pytest.mark.parametrize(
    "command",
    [
        "find . -fprint {o}/pwned",
        "find . -fprintf {o}/pwned %p",
        "find . -fls {o}/pwned",
        "find {o} -delete",
        "find . -execdir touch {o}/pwned \\;",
        "find {o} -type f -exec cat {{}} +",
    ],
)
def test_find_options_cannot_reach_outside(tmp_path: Path, outside: Path, command: str) -> None:
    ctx = context(tmp_path, allowed_commands=("find", "touch", "cat"))

    _, output, _ = run(ctx, command.format(o=outside))

    assert SECRET not in output
    unchanged(outside)


def test_an_interpreter_is_held_by_the_same_walls(tmp_path: Path, outside: Path) -> None:
    ctx = context(tmp_path, allowed_commands=("python3",))
    script = (
        "import os, glob\n"
        f'for p in ["{outside}/secret.txt", "/etc/shadow", "/root/.bashrc"]:\n'
        "    try: print(open(p).read())\n"
        "    except OSError as e: print(type(e).__name__)\n"
        f'try: open("{outside}/pwned", "w")\n'
        "except OSError as e: print(type(e).__name__)\n"
        'print(sorted(os.listdir("/")))\n'
    )

    ok, output, _ = run(ctx, f"python3 -c '{script}'")

    assert ok, output
    assert SECRET not in output and output.count("FileNotFoundError") == 4
    assert "'home'" not in output and "'root'" not in output
    unchanged(outside)


# --- limits -------------------------------------------------------------------------------------


def _processes_with(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


def no_limit(detail: str) -> None:
    """No way to hold the process count on this host (no writable pids cgroup for a root
    server): off CI the test is skipped with the reason; under CI=true, whose machine has one,
    it fails."""
    if os.environ.get("CI", "").strip().lower() in ("1", "true", "yes", "on"):
        pytest.fail(f"CI=true and the sandbox cannot limit processes here: {detail}", pytrace=False)
    pytest.skip(detail)


def test_the_process_count_is_limited(tmp_path: Path) -> None:
    if sandbox.status().process_limit == "none":
        no_limit(sandbox.status().detail)
    ctx = context(tmp_path, runtime={"shell_max_processes": 16})
    script = (
        "import os, time\nn = 0\nfor _ in range(100):\n    try:\n        pid = os.fork()\n"
        "    except OSError:\n        break\n    if pid == 0:\n        time.sleep(2)\n        os._exit(0)\n"
        "    n += 1\nprint(n)\n"
    )

    ok, output, _ = run(ctx, f"python3 -c '{script}'")

    assert ok, output
    assert 0 < int(output) < 16


def test_a_fork_bomb_is_held_by_the_limit_and_ended_by_the_timeout(tmp_path: Path) -> None:
    if sandbox.status().process_limit == "none":
        no_limit(sandbox.status().detail)
    marker = f"bomb-{os.getpid()}-{time.monotonic_ns()}"
    ctx = context(tmp_path, timeout=3, runtime={"shell_max_processes": 32})
    script = f"import os\nwhile True:\n    try: os.fork()\n    except OSError: pass  # {marker}\n"

    ok, _, error = run(ctx, f"python3 -c '{script}'")

    assert not ok and error == "Command timed out after 3s"
    deadline = time.monotonic() + 5
    while _processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _processes_with(marker) == []


def test_a_memory_hog_is_refused_its_memory(tmp_path: Path) -> None:
    ctx = context(tmp_path, runtime={"shell_max_memory_mb": 256})

    ok, output, _ = run(ctx, "python3 -c 'b = bytearray(1024 * 1024 * 1024)'")

    assert not ok and "MemoryError" in output


def test_cpu_time_and_file_size_are_limited(tmp_path: Path) -> None:
    ctx = context(tmp_path, timeout=30, runtime={"shell_max_cpu_secs": 1, "shell_max_file_size_mb": 1})

    ok, _, error = run(ctx, "python3 -c 'while True: pass'")
    assert not ok and error != "Command timed out after 30s"
    ok, _, _ = run(ctx, "python3 -c \"open('big', 'wb').write(b'0' * 3 * 1024 * 1024)\"")
    assert not ok
    assert (ctx.workspace / "big").stat().st_size <= 1024 * 1024


def test_a_ten_megabyte_command_is_refused_before_anything_runs(tmp_path: Path) -> None:
    ctx = context(tmp_path)
    started = time.monotonic()

    ok, output, error = run(ctx, "touch made && echo " + "é" * 5_000_000)

    assert (ok, output) == (False, "")
    assert error == f"Command is too long (10000019 bytes); the limit is {MAX_COMMAND_BYTES} bytes"
    assert not (ctx.workspace / "made").exists()
    assert time.monotonic() - started < 5  # refused at once, not after minutes of matching


@pytest.mark.parametrize(
    "command",
    [
        "echo " + "a" * 65000,  # one long word: the fork-bomb pattern took 18 minutes on this
        "echo " + "a(){ " * 12000,
        "echo " + "a|" * 30000,
        "echo " + "x" * 30000 + "()" + "{" + "x|" * 10000,
        "echo" + " > a" * 15000,  # every target was resolved against every root: 24 s
        "echo" + " < a" * 15000,
    ],
)
def test_the_textual_checks_take_linear_time_up_to_the_cap(tmp_path: Path, command: str) -> None:
    ctx = context(tmp_path, block_high_risk_commands=True)
    started = time.monotonic()

    run(ctx, command)

    assert time.monotonic() - started < 5


# --- the network, write-only roots, and no sandbox ----------------------------------------------


@pytest.fixture
def listener() -> Iterator[int]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(5)
    yield server.getsockname()[1]
    server.close()


def test_the_network_is_off_unless_the_profile_allows_it(tmp_path: Path, listener: int) -> None:
    command = (
        f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', {listener}), 2); print('up')\""
    )

    ok, output, _ = run(context(tmp_path), command)
    assert not ok and "up" not in output
    assert run(context(tmp_path, shell_network=True), command) == (True, "up\n", None)


def test_a_write_only_root_takes_files_but_shows_nothing(tmp_path: Path) -> None:
    drop = tmp_path / "drop"
    drop.mkdir()
    (drop / "old.txt").write_text(SECRET)
    ctx = context(tmp_path, allowed_roots_write_only=(str(drop),))

    assert run(ctx, f"ls -a {drop}") == (True, ".\n..\n", None)
    ok, output, _ = run(ctx, f"cat {drop}/old.txt")
    assert not ok and SECRET not in output
    assert run(ctx, f"echo new > {drop}/new.txt && mkdir -p {drop}/d && echo deep > {drop}/d/f")[0]

    assert (drop / "new.txt").read_text() == "new\n"
    assert (drop / "d" / "f").read_text() == "deep\n"
    assert (drop / "old.txt").read_text() == SECRET
    assert file_read(ctx, {"path": str(drop / "new.txt")}).error == (
        f"Path '{drop}/new.txt' is in a write-only root and cannot be read"
    )


def test_without_bubblewrap_shell_refuses_and_names_the_cause(
    tmp_path: Path, settings: object, outside: Path
) -> None:
    settings.CLAWBOARD_BWRAP = str(tmp_path / "no-bwrap")  # type: ignore[attr-defined]
    ctx = context(tmp_path)

    ok, _, error = run(ctx, "touch made")

    assert not ok
    assert error == (
        f"Shell sandbox unavailable: bubblewrap is not installed ({tmp_path}/no-bwrap not found; "
        "install the Debian package bubblewrap). shell does not run without it; a risk profile "
        "may set sandbox_enabled = false to run commands unsandboxed"
    )
    assert not (ctx.workspace / "made").exists()
    # Only an explicit sandbox_enabled = false runs it, and then nothing holds but the text checks.
    unsandboxed = context(tmp_path, sandbox_enabled=False)
    assert run(unsandboxed, f"cat {outside}/secret.txt") == (True, SECRET, None)
    assert "CLAWBOARD" not in run(unsandboxed, "env")[1]


def test_the_sandboxs_tmp_is_its_own_and_bounded(tmp_path: Path) -> None:
    ctx = context(tmp_path, runtime={"shell_max_file_size_mb": 4})
    marker = f"scratch-{os.getpid()}-{time.monotonic_ns()}"
    fill = f"python3 -c \"[open(f'/tmp/{marker}-{{i}}', 'wb').write(b'0' * 1024 * 1024) for i in range(8)]\""

    ok, output, _ = run(ctx, fill)

    assert not ok and "No space left on device" in output
    assert not list(Path("/tmp").glob(f"{marker}*"))  # never the host's /tmp
    assert marker not in run(ctx, "ls -A /tmp")[1]  # nor the next call's


def test_nothing_but_the_grants_and_a_bounded_tmp_is_writable(tmp_path: Path) -> None:
    ctx = context(tmp_path)

    for path in ("/x", "/etc/x", "/usr/x", "/dev/x", "/proc/x"):
        ok, output, _ = run(ctx, f"python3 -c \"open('{path}', 'w')\"")
        assert not ok and ("Read-only file system" in output or "No such file" in output), (path, output)
    ok, output, _ = run(ctx, "python3 -c \"open('/dev/shm/x', 'wb').write(b'0' * 4 * 1024 * 1024)\"")
    assert not ok and "No space left on device" in output
    write = "python3 -c \"open('/var/tmp/note', 'w').write('scratch')\" && cat /tmp/note"
    assert run(ctx, write) == (True, "scratch", None)


def test_the_kernels_global_settings_are_read_only(tmp_path: Path) -> None:
    ctx = context(tmp_path)
    # Opened for update but never written: if this ever opened, nothing would change.
    probe = 'import sys\ntry:\n    open(sys.argv[1], "r+")\nexcept OSError as e:\n    print(e.errno)\n'

    for path in ("/proc/sys/kernel/core_pattern", "/proc/sys/vm/drop_caches"):
        ok, output, _ = run(ctx, f"python3 -c '{probe}' {path}")
        assert ok and output.strip() in ("30", "13"), (path, output)  # EROFS, EACCES
    assert run(ctx, "cat /proc/sys/kernel/ostype") == (True, "Linux\n", None)
