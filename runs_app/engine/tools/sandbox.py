"""The OS sandbox `shell` runs in: bubblewrap (`/usr/bin/bwrap`), built from the risk profile.

What a command sees (docs/tools.md, "Threat model"): new PID, IPC, UTS and cgroup namespaces,
and a new network namespace unless `shell_network`; `/usr` and its symlinks (`/bin`, `/lib`,
...) read-only; a handful of `/etc` files programs need, never the server's `/etc`; its own
`/proc`, a minimal `/dev`, an empty `/tmp`; the workspace read-write and each allowed root as
the profile grants it, every path at its real name; forbidden paths inside those roots hidden
under an empty, read-only directory. Nothing else of the host exists in it.

Limits come from the runtime profile: CPU seconds, address space, file size and process count
as rlimits set inside the sandbox with `prlimit`. The kernel never applies RLIMIT_NPROC to
processes of the host's root user, so when the server runs as root the process count is held by
a `pids` cgroup instead, where the host offers a writable one.
"""

from __future__ import annotations

import os
import shutil
import signal
import stat
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from policies_app.specs import RiskProfileSpec, RuntimeProfileSpec, effective_shell_limit
from runs_app.engine.tools.files import _parent_fd, _replace
from runs_app.engine.tools.paths import READ_ONLY, WRITE_ONLY, forbidden_roots, grant_roots, open_base

DEFAULT_BWRAP = "/usr/bin/bwrap"
PRLIMIT = "/usr/bin/prlimit"
SANDBOX_PATH = "/usr/local/bin:/usr/bin:/bin"
# Top-level names that are symlinks into /usr on merged-/usr systems, or directories otherwise.
SYSTEM_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# The parts of /etc that programs need to start and to find their libraries, certificates,
# time zone and alternatives; never passwd/shadow/hosts of the server (passwd is synthesised).
ETC_ENTRIES = (
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/alternatives",
    "/etc/localtime",
    "/etc/ssl/certs",  # never /etc/ssl/private: a root server's sandbox could read its keys
    "/etc/ssl/openssl.cnf",
    "/etc/ca-certificates",
    "/etc/mime.types",
)
NETWORK_ETC_ENTRIES = ("/etc/resolv.conf", "/etc/hosts", "/etc/nsswitch.conf", "/etc/gai.conf")
# The parts of the sandbox's own /proc that reach the host's kernel as a whole: read-only
# (sysctls such as kernel.core_pattern are writable by uid 0 without any capability, and a
# root server's sandbox runs as uid 0), or hidden. The same lists as Docker's defaults.
PROC_READ_ONLY = ("/proc/sys", "/proc/sysrq-trigger", "/proc/fs")
PROC_HIDDEN_DIRS = ("/proc/asound", "/proc/acpi", "/proc/scsi")
PROC_HIDDEN_FILES = (
    "/proc/kcore",
    "/proc/keys",
    "/proc/latency_stats",
    "/proc/timer_list",
    "/proc/sched_debug",
)
# Grants under these are never mounted: the sandbox has its own /proc and /dev, and no /sys.
KERNEL_DIRS = ("/proc", "/sys", "/dev")
CGROUP_PIDS_ROOTS = ("/sys/fs/cgroup/pids", "/sys/fs/cgroup", "/sys/fs/cgroup/unified")
CGROUP_PARENT = "clawboard-shell"


@dataclass(frozen=True)
class SandboxStatus:
    available: bool
    backend: str
    detail: str  # why it cannot start, or how processes are counted when it can
    process_limit: str  # "rlimit", "cgroup" or "none" (root server without a pids cgroup)

    def as_dict(self) -> dict[str, object]:
        return {
            "available": self.available,
            "backend": self.backend,
            "detail": self.detail,
            "process_limit": self.process_limit,
        }


def bwrap_path() -> str:

    return str(getattr(settings, "CLAWBOARD_BWRAP", DEFAULT_BWRAP))


_probe_lock = threading.Lock()
_probed: dict[str, SandboxStatus] = {}


def status(*, refresh: bool = False) -> SandboxStatus:
    """Whether bubblewrap can start a sandbox on this host (probed once per bwrap path)."""
    path = bwrap_path()
    with _probe_lock:
        if refresh or path not in _probed:
            _probed[path] = _probe(path)
        return _probed[path]


def _probe(path: str) -> SandboxStatus:
    limit = "rlimit" if os.geteuid() != 0 else ("cgroup" if _pids_cgroup_root() else "none")
    if not os.path.isfile(path) or not os.access(path, os.X_OK):
        cause = f"bubblewrap is not installed ({path} not found; install the Debian package bubblewrap)"
        return SandboxStatus(False, "bubblewrap", cause, limit)
    if not os.access(PRLIMIT, os.X_OK):
        return SandboxStatus(False, "bubblewrap", f"{PRLIMIT} (util-linux) is not installed", limit)
    argv = [
        path,
        *_namespace_args(network=False),
        *_system_args(network=False),
        *FINAL_READ_ONLY,
        "--",
        "/bin/true",
    ]
    try:
        done = subprocess.run(argv, env={"PATH": SANDBOX_PATH}, capture_output=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return SandboxStatus(False, "bubblewrap", f"bubblewrap cannot start: {exc}", limit)
    if done.returncode != 0:
        reason = done.stderr.decode("utf-8", "replace").strip().splitlines()
        text = reason[-1] if reason else f"exit status {done.returncode}"
        return SandboxStatus(
            False, "bubblewrap", f"bubblewrap cannot start a sandbox on this host: {text}", limit
        )
    detail = {
        "rlimit": "process count held by RLIMIT_NPROC",
        "cgroup": "process count held by a pids cgroup (the server runs as root)",
        "none": "the server runs as root and no writable pids cgroup exists: process count is not limited",
    }[limit]
    return SandboxStatus(True, "bubblewrap", detail, limit)


def _namespace_args(*, network: bool) -> list[str]:
    args = ["--die-with-parent", "--new-session", "--unshare-pid", "--unshare-ipc", "--unshare-uts"]
    args += ["--unshare-cgroup-try", "--hostname", "sandbox"]
    if not network:
        args.append("--unshare-net")
    if os.geteuid() == 0:
        args += ["--cap-drop", "ALL"]
    return args


def _system_args(*, network: bool, scratch_bytes: int = 64 * 1024 * 1024) -> list[str]:
    args = ["--ro-bind", "/usr", "/usr"]
    for link in SYSTEM_LINKS:
        if os.path.islink(link):
            args += ["--symlink", os.readlink(link), link]
        elif os.path.isdir(link):
            args += ["--ro-bind", link, link]
    args += ["--dir", "/etc"]
    for entry in ETC_ENTRIES + (NETWORK_ETC_ENTRIES if network else ()):
        args += ["--ro-bind-try", entry, entry]
    args += ["--ro-bind", str(_identity_dir() / "passwd"), "/etc/passwd"]
    args += ["--ro-bind", str(_identity_dir() / "group"), "/etc/group"]
    # Sized: a tmpfs lives in the host's memory, and would otherwise grow to half of it. The
    # rest of the sandbox's own tmpfs (its root, /dev) is made read-only at the end.
    args += ["--proc", "/proc"]
    for path in PROC_READ_ONLY:
        args += ["--ro-bind-try", path, path]
    for path in PROC_HIDDEN_DIRS:
        if os.path.isdir(path):
            args += ["--size", "4096", "--tmpfs", path]
    for path in PROC_HIDDEN_FILES:
        if os.path.exists(path):
            args += ["--ro-bind", "/dev/null", path]
    args += ["--dev", "/dev", "--size", "1048576", "--tmpfs", "/dev/shm"]
    args += [
        "--size",
        str(scratch_bytes),
        "--tmpfs",
        "/tmp",
        "--dir",
        "/var",
        "--symlink",
        "/tmp",
        "/var/tmp",
    ]
    return args


FINAL_READ_ONLY = ["--remount-ro", "/dev", "--remount-ro", "/"]


_identity: Path | None = None


def _identity_dir() -> Path:
    """A private directory with the sandbox's /etc/passwd and /etc/group: the server's user only."""
    global _identity
    if _identity is None or not (_identity / "passwd").exists():
        directory = Path(tempfile.mkdtemp(prefix="clawboard-sandbox-etc-"))
        uid, gid = os.getuid(), os.getgid()
        name = "root" if uid == 0 else "agent"
        (directory / "passwd").write_text(f"{name}:x:{uid}:{gid}:{name}:/nonexistent:/bin/sh\n")
        (directory / "group").write_text(f"{name}:x:{gid}:\n")
        _identity = directory
    return _identity


@dataclass(frozen=True)
class _Mount:
    path: str
    kind: str  # "rw", "ro" or "hide"

    @property
    def depth(self) -> int:
        return self.path.count("/")


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _mounts(risk: RiskProfileSpec, workspace: Path, staged: dict[str, str]) -> list[_Mount]:

    grants: list[_Mount] = []
    for grant in grant_roots(risk, workspace):
        path = str(grant.root)
        if path == "/" or any(_inside(path, k) for k in KERNEL_DIRS):
            continue
        if grant.mode == WRITE_ONLY:
            if path in staged:
                grants.append(_Mount(path, "wo"))
            continue
        grants.append(_Mount(path, "ro" if grant.mode == READ_ONLY else "rw"))
    granted = {m.path for m in grants}
    hides = [
        _Mount(str(entry), "hide")
        for entry in forbidden_roots(risk, workspace)
        if str(entry) not in granted
        and any(_inside(str(entry), m.path) and m.path != str(entry) for m in grants)
    ]
    # Parents before children, so a deeper grant or a hidden path lands on top of its root;
    # at one depth, hiding comes before a grant, so a grant beneath a forbidden entry still shows.
    order = {"hide": 0, "ro": 1, "rw": 1, "wo": 1}
    return sorted(hides + grants, key=lambda m: (m.depth, order[m.kind]))


def _mount_args(mounts: list[_Mount], staged: dict[str, str]) -> list[str]:
    args: list[str] = []
    # Hiding directories become read-only last: a grant beneath one needs its mount point made.
    read_only_later: list[str] = []
    for mount in mounts:
        if mount.kind == "rw":
            args += ["--bind-try", mount.path, mount.path]
        elif mount.kind == "ro":
            args += ["--ro-bind-try", mount.path, mount.path]
        elif mount.kind == "wo":
            args += ["--bind", staged[mount.path], mount.path]
        elif os.path.isdir(mount.path):
            args += ["--size", "4096", "--tmpfs", mount.path]
            read_only_later.append(mount.path)
        elif os.path.lexists(mount.path):
            args += ["--ro-bind", "/dev/null", mount.path]
    for path in read_only_later:
        args += ["--remount-ro", path]
    return args


def _limit_args(runtime: RuntimeProfileSpec) -> list[str]:
    mib = 1024 * 1024
    cpu = effective_shell_limit(runtime, "shell_max_cpu_secs")
    memory = effective_shell_limit(runtime, "shell_max_memory_mb") * mib
    fsize = effective_shell_limit(runtime, "shell_max_file_size_mb") * mib
    nproc = effective_shell_limit(runtime, "shell_max_processes")
    return [PRLIMIT, f"--cpu={cpu}", f"--as={memory}", f"--fsize={fsize}", f"--nproc={nproc}", "--"]


def command_argv(
    risk: RiskProfileSpec,
    runtime: RuntimeProfileSpec,
    workspace: Path,
    argv: list[str],
    *,
    staged: dict[str, str] | None = None,
    read_only_extra: tuple[str, ...] = (),
    limits: list[str] | None = None,
) -> list[str]:
    """The bwrap command line that runs `argv` in the sandbox of this profile.
    `read_only_extra`: paths bound read-only at their real names besides the profile's grants
    (what an MCP server needs to run); `limits`: the prlimit command instead of shell's."""
    staged = staged or {}
    network = risk.shell_network
    scratch = effective_shell_limit(runtime, "shell_max_file_size_mb") * 1024 * 1024
    args = [
        bwrap_path(),
        *_namespace_args(network=network),
        *_system_args(network=network, scratch_bytes=scratch),
    ]
    for path in read_only_extra:
        args += ["--ro-bind", path, path]
    args += _mount_args(_mounts(risk, workspace, staged), staged)
    args += FINAL_READ_ONLY + ["--chdir", str(workspace), "--"]  # bwrap also sets PWD to it
    return args + (limits if limits is not None else _limit_args(runtime)) + argv


def server_limit_args(runtime: RuntimeProfileSpec) -> list[str]:
    """A long-lived MCP server's rlimits. CPU starts unlimited: each call sets the soft limit
    of the server's processes to what they used so far plus the per-call allowance."""
    mib = 1024 * 1024
    memory = effective_shell_limit(runtime, "mcp_max_memory_mb") * mib
    fsize = effective_shell_limit(runtime, "mcp_max_file_size_mb") * mib
    nproc = effective_shell_limit(runtime, "mcp_max_processes")
    return [PRLIMIT, "--cpu=unlimited", f"--as={memory}", f"--fsize={fsize}", f"--nproc={nproc}", "--"]


def write_only_roots(risk: RiskProfileSpec, workspace: Path) -> list[str]:

    return [
        str(g.root)
        for g in grant_roots(risk, workspace)
        if g.mode == WRITE_ONLY and g.root.is_dir() and not any(_inside(str(g.root), k) for k in KERNEL_DIRS)
    ]


@contextmanager
def staged_write_only_roots(risk: RiskProfileSpec, workspace: Path) -> Iterator[dict[str, str]]:
    """Each write-only root as an empty directory of its own in the sandbox: the command can
    write there but sees nothing the root already holds. Afterwards the regular files it wrote
    are moved into the root (replacing files of the same name), symlinks and devices dropped."""
    staged = {root: tempfile.mkdtemp(prefix="clawboard-wo-") for root in write_only_roots(risk, workspace)}
    try:
        yield staged
    finally:
        for root, directory in staged.items():
            try:
                _deliver(directory, root)
            finally:
                shutil.rmtree(directory, ignore_errors=True)


def _deliver(directory: str, root: str) -> None:

    for current, dirs, names in os.walk(directory):
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(current, d))]
        for name in names:
            source = os.path.join(current, name)
            relative = os.path.relpath(source, directory)
            try:
                fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            except OSError:
                continue  # a symlink, or gone
            with os.fdopen(fd, "rb") as handle:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    continue
                data = handle.read()
            try:
                base = open_base(Path(root))
                try:
                    parent = _parent_fd(base, relative)
                finally:
                    os.close(base)
                try:
                    _replace(parent, os.path.basename(relative), data)
                finally:
                    os.close(parent)
            except OSError:
                continue


# ---------------------------------------------------------------------------------------------
# The pids cgroup, for a server running as root.


def _pids_cgroup_root() -> str | None:
    for root in CGROUP_PIDS_ROOTS:
        if os.path.isfile(os.path.join(root, "cgroup.procs")) and os.access(root, os.W_OK):
            v1 = os.path.basename(root) == "pids"
            controllers = os.path.join(root, "cgroup.subtree_control")
            if v1 or (os.path.isfile(controllers) and "pids" in Path(controllers).read_text().split()):
                parent = os.path.join(root, CGROUP_PARENT)
                try:
                    os.makedirs(parent, exist_ok=True)
                    if not v1:
                        Path(parent, "cgroup.subtree_control").write_text("+pids")
                except OSError:
                    continue
                if os.path.isfile(os.path.join(parent, "pids.max")) or not v1:
                    return parent
    return None


@contextmanager
def process_cgroup(runtime: RuntimeProfileSpec) -> Iterator[str | None]:
    """A fresh pids cgroup with the process limit; yields its `cgroup.procs`, or None when the
    limit is an rlimit (non-root server) or the host has no writable pids cgroup."""
    if os.geteuid() != 0 or status().process_limit != "cgroup":
        yield None
        return
    parent = _pids_cgroup_root()
    if parent is None:
        yield None
        return
    group = os.path.join(parent, f"call-{uuid.uuid4().hex}")
    os.mkdir(group)
    try:
        Path(group, "pids.max").write_text(str(effective_shell_limit(runtime, "shell_max_processes")))
        yield os.path.join(group, "cgroup.procs")
    finally:
        _remove_cgroup(group)


def _remove_cgroup(group: str) -> None:

    for _ in range(100):
        try:
            pids = [int(p) for p in Path(group, "cgroup.procs").read_text().split()]
        except OSError:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            os.rmdir(group)
            return
        except OSError:
            time.sleep(0.02)


def enter_cgroup_argv(procs: str, argv: list[str]) -> list[str]:
    """`argv` started by a shell that first moves itself into the cgroup, so nothing forks outside."""
    return ["/bin/sh", "-c", 'echo $$ > "$1" && shift && exec "$@"', "sh", procs, *argv]
