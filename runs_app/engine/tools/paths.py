"""Where a file tool may act: the workspace, allowed roots and forbidden paths of a risk profile.

The rule, decided on the fully resolved path (symlinks followed, `..` collapsed):

* Grants: the workspace and `allowed_roots` grant read and write, `allowed_roots_read_only`
  grants read, `allowed_roots_write_only` grants write. Relative roots are joined to the
  workspace; `~` is expanded.
* `forbidden_paths` refuse a path beneath them, unless a grant for the same kind of access
  contains the path and lies at or beneath the forbidden entry: the more specific entry wins.
  So a workspace under `/tmp` stays usable although `/tmp` is forbidden, while a forbidden
  `~/.ssh` inside a workspace at `~` is still refused.
* With `workspace_only` in effect, a path must also lie inside a grant for that access.
  Without it, any path that is not forbidden is allowed.
* `/proc`, `/sys` and `/dev` are never opened by a file tool, whatever the profile says: their
  magic links and files (`/proc/<pid>/environ`) lead to the server itself.

The decision is made on a path; the file is then opened with `open_beneath`, descriptor-relative
from the root that granted it and refusing every symlink on the way (the path was already fully
resolved), so a symlink swapped in between the check and the use makes the call fail instead of
escaping.
"""

from __future__ import annotations

import ctypes
import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from policies_app.specs import RiskProfileSpec
from runs_app.engine.tools.base import LocalToolContext

READ_WRITE, READ_ONLY, WRITE_ONLY = "rw", "ro", "wo"
KERNEL_DIRS = (Path("/proc"), Path("/sys"), Path("/dev"))


class PathDenied(Exception):
    """A path the policy refuses; the message is shown to the model as it is."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True)
class _Grant:
    root: Path
    mode: str

    def permits(self, for_write: bool) -> bool:
        return self.mode == READ_WRITE or self.mode == (WRITE_ONLY if for_write else READ_ONLY)


def _canonical(entry: str | Path, base: Path) -> Path:
    path = Path(os.path.expanduser(entry))
    if not path.is_absolute():
        path = base / path
    return path.resolve()


def workspace_of(ctx: LocalToolContext) -> Path:
    return Path(os.path.expanduser(ctx.workspace)).resolve()


def grant_roots(risk: RiskProfileSpec, workspace: Path) -> list[_Grant]:
    """The workspace and the allowed roots, resolved. A root written inside the workspace that
    resolves outside it (through a symlink the agent could have planted) grants nothing."""
    grants = [_Grant(workspace, READ_WRITE)]
    for entries, mode in (
        (risk.allowed_roots, READ_WRITE),
        (risk.allowed_roots_read_only, READ_ONLY),
        (risk.allowed_roots_write_only, WRITE_ONLY),
    ):
        for entry in entries:
            if entry.strip() in ("", "*"):
                continue
            root = _canonical(entry, workspace)
            written = Path(os.path.normpath(workspace / os.path.expanduser(entry)))
            if written.is_relative_to(workspace) and not root.is_relative_to(workspace):
                continue
            grants.append(_Grant(root, mode))
    return grants


def _grants(ctx: LocalToolContext, workspace: Path) -> list[_Grant]:
    return grant_roots(ctx.risk, workspace)


def _forbidden(ctx: LocalToolContext, workspace: Path) -> list[Path]:
    return forbidden_roots(ctx.risk, workspace)


def forbidden_roots(risk: RiskProfileSpec, workspace: Path) -> list[Path]:
    roots: set[Path] = set()
    for entry in risk.forbidden_paths:
        if not entry.strip():
            continue
        written = Path(os.path.expanduser(entry))
        if not written.is_absolute():
            written = workspace / written
        # Both spellings: `/bin` may be a symlink to `/usr/bin`, and either can be named.
        roots.add(Path(os.path.normpath(written)))
        roots.add(written.resolve())
    return sorted(roots)


@dataclass(frozen=True)
class Access:
    """A path the policy allows, and the directory to open it from (`base`, an ancestor)."""

    path: Path
    base: Path

    @property
    def relative(self) -> str:
        return str(self.path.relative_to(self.base)) if self.path != self.base else "."


def resolve_path(ctx: LocalToolContext, raw: str, *, for_write: bool) -> Path:
    """The resolved path `raw` names, or PathDenied when the policy refuses that access."""
    return resolve_access(ctx, raw, for_write=for_write).path


def resolve_access(ctx: LocalToolContext, raw: str, *, for_write: bool) -> Access:
    """Like `resolve_path`, with the granting root to open the path from."""
    if not raw.strip():
        raise PathDenied("Path is empty")
    if "\x00" in raw:
        raise PathDenied("Path contains a null byte")
    try:
        workspace = workspace_of(ctx)
        target = _canonical(raw, workspace)
        grants = _grants(ctx, workspace)
        forbidden = _forbidden(ctx, workspace)
    except (OSError, RuntimeError, ValueError) as exc:  # symlink loops, over-long names
        raise PathDenied(f"Path '{raw}' cannot be resolved: {exc}") from exc

    containing = [g for g in grants if target.is_relative_to(g.root)]
    granting = [g.root for g in containing if g.permits(for_write)]
    blocked = any(
        not any(root.is_relative_to(entry) for root in granting)
        for entry in forbidden
        if target.is_relative_to(entry)
    )
    kernel = next((k for k in KERNEL_DIRS if target.is_relative_to(k)), None)
    if kernel is not None:
        raise PathDenied(f"Path '{raw}' is in {kernel}, which file tools never open")
    if not blocked and (granting or not ctx.risk.effective_workspace_only):
        # The shallowest root: the fewest directories on the way that the agent could change.
        base = min(granting, key=lambda root: len(root.parts)) if granting else Path("/")
        return Access(target, base)
    if containing and not granting:
        if for_write:
            raise PathDenied(f"Path '{raw}' is in a read-only root and cannot be written")
        raise PathDenied(f"Path '{raw}' is in a write-only root and cannot be read")
    if blocked:
        raise PathDenied(f"Path '{raw}' is forbidden by policy")
    raise PathDenied(f"Path '{raw}' is outside the workspace and allowed roots")


# ---------------------------------------------------------------------------------------------
# Opening what was checked: openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS).

_SYS_OPENAT2 = 437  # the same number on every architecture Clawboard runs on (asm-generic)
_RESOLVE_NO_MAGICLINKS, _RESOLVE_NO_SYMLINKS, _RESOLVE_BENEATH = 0x02, 0x04, 0x08


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_has_openat2 = True


def _openat2(dir_fd: int, name: str, flags: int, mode: int) -> int:
    how = _OpenHow(flags, mode if flags & os.O_CREAT else 0, _RESOLVE_BENEATH | _RESOLVE_NO_SYMLINKS)
    how.resolve |= _RESOLVE_NO_MAGICLINKS
    fd = _libc.syscall(
        ctypes.c_long(_SYS_OPENAT2),
        ctypes.c_int(dir_fd),
        ctypes.c_char_p(os.fsencode(name)),
        ctypes.byref(how),
        ctypes.c_size_t(ctypes.sizeof(how)),
    )
    if fd < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), name)
    return int(fd)


def open_at(dir_fd: int, name: str, flags: int, mode: int = 0o666) -> int:
    """Open `name` (relative, no `..`) beneath `dir_fd`, never through a symlink or magic link."""
    global _has_openat2
    flags |= os.O_CLOEXEC
    if _has_openat2:
        try:
            return _openat2(dir_fd, name, flags, mode)
        except OSError as exc:
            if exc.errno != errno.ENOSYS:
                raise
            _has_openat2 = False
    # Older kernels: the same walk by hand, one component at a time, each with O_NOFOLLOW.
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if any(p == ".." for p in parts):
        raise OSError(errno.EXDEV, "path leaves its root", name)
    if not parts:
        return os.open(".", flags, dir_fd=dir_fd)
    current = os.dup(dir_fd)
    try:
        for part in parts[:-1]:
            # O_PATH | O_NOFOLLOW opens a symlink itself, so it can be told apart from a directory.
            nxt = os.open(part, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=current)
            os.close(current)
            current = nxt
            if stat.S_ISLNK(os.fstat(current).st_mode):
                raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), name)
        try:
            if stat.S_ISLNK(os.stat(parts[-1], dir_fd=current, follow_symlinks=False).st_mode):
                raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), name)
        except FileNotFoundError:
            pass
        return os.open(parts[-1], flags | os.O_NOFOLLOW, mode, dir_fd=current)
    finally:
        os.close(current)


def open_base(base: Path) -> int:
    return os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)


def swapped(raw: str) -> PathDenied:
    return PathDenied(f"Path '{raw}' changed while it was opened (a symlink or a link out of its root)")
