"""`file_read`, `file_write` and `file_list`: file access inside what the risk profile allows."""

from __future__ import annotations

import errno
import os
import stat
import uuid
from typing import Any

from policies_app.policy import blocked_by_readonly, readonly_refusal
from runs_app.engine.tools.base import LocalToolContext, ToolResult
from runs_app.engine.tools.paths import PathDenied, open_at, open_base, resolve_access, swapped

DEFAULT_READ_BYTES = 256 * 1024
MAX_READ_BYTES = 4 * 1024 * 1024
MAX_LIST_ENTRIES = 1000
EMPTY_DIRECTORY = "(empty directory)"

TOOL_SPECS: dict[str, dict[str, Any]] = {
    "file_read": {
        "name": "file_read",
        "description": (
            "Read a text file. Relative paths are resolved against the workspace. "
            f"Returns at most max_bytes bytes (default {DEFAULT_READ_BYTES}), with a marker when cut."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "path": {
                    "type": "string",
                    "description": "File to read, relative to the workspace or absolute",
                },
                "max_bytes": {
                    "type": "integer",
                    "minimum": 1,
                    "description": f"Read at most this many bytes (capped at {MAX_READ_BYTES})",
                },
            },
            "required": ["path"],
        },
    },
    "file_write": {
        "name": "file_write",
        "description": (
            "Write text to a file, replacing its content; missing parent directories are created. "
            "Relative paths are resolved against the workspace."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "path": {
                    "type": "string",
                    "description": "File to write, relative to the workspace or absolute",
                },
                "content": {"type": "string", "description": "The complete new content of the file"},
            },
            "required": ["path", "content"],
        },
    },
    "file_list": {
        "name": "file_list",
        "description": (
            "List a directory: one entry per line, sorted by name, directories end with '/'. "
            "Relative paths are resolved against the workspace."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "path": {
                    "type": "string",
                    "description": "Directory to list (default: the workspace)",
                    "default": ".",
                },
            },
            "required": [],
        },
    },
}


class _BadArgument(Exception):
    pass


def _path_argument(args: dict[str, Any], *, default: str | None = None) -> str:
    value = args.get("path")
    if value is None or value == "":
        if default is None:
            raise _BadArgument("Missing 'path' parameter")
        return default
    if not isinstance(value, str):
        raise _BadArgument("'path' must be a string")
    return value


def _read_limit(args: dict[str, Any]) -> int:
    value = args.get("max_bytes")
    if value is None:
        return DEFAULT_READ_BYTES
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise _BadArgument("'max_bytes' must be a positive integer")
    return min(value, MAX_READ_BYTES)


def _io_error(action: str, raw: str, exc: OSError) -> ToolResult:
    return ToolResult.fail(f"Cannot {action} '{raw}': {exc.strerror or exc}")


def _denied(raw: str, exc: OSError) -> ToolResult | None:
    """The refusal for an open that met a symlink or left its root, if that is what happened."""
    if exc.errno in (errno.ELOOP, errno.EXDEV):
        return ToolResult.fail(swapped(raw).message)
    return None


def file_read(ctx: LocalToolContext, args: dict[str, Any]) -> ToolResult:
    try:
        raw = _path_argument(args)
        limit = _read_limit(args)
        access = resolve_access(ctx, raw, for_write=False)
    except _BadArgument as exc:
        return ToolResult.fail(str(exc))
    except PathDenied as exc:
        return ToolResult.fail(exc.message)
    try:
        base = open_base(access.base)
        try:
            # O_NONBLOCK: opening a FIFO must not hang; it is refused below as not a regular file.
            fd = open_at(base, access.relative, os.O_RDONLY | os.O_NONBLOCK)
        finally:
            os.close(base)
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            os.close(fd)
            if stat.S_ISDIR(info.st_mode):
                return ToolResult.fail(f"Path '{raw}' is a directory")
            return ToolResult.fail(f"Path '{raw}' is not a regular file")
        with os.fdopen(fd, "rb") as handle:
            data = handle.read(limit + 1)
    except FileNotFoundError:
        return ToolResult.fail(f"Path '{raw}' does not exist")
    except OSError as exc:
        return _denied(raw, exc) or _io_error("read", raw, exc)
    text = data[:limit].decode("utf-8", errors="replace")
    if len(data) > limit:
        size = max(info.st_size, len(data))
        text += f"\n[truncated: showing the first {limit} of {size} bytes]"
    return ToolResult.ok(text)


def _parent_fd(base_fd: int, relative: str) -> int:
    """The directory that will hold `relative`, opened beneath `base_fd`; missing ones are made."""
    current = os.dup(base_fd)
    try:
        for part in [p for p in relative.split("/")[:-1] if p not in ("", ".")]:
            try:
                os.mkdir(part, dir_fd=current)
            except FileExistsError:
                pass
            nxt = open_at(current, part, os.O_RDONLY | os.O_DIRECTORY)
            os.close(current)
            current = nxt
        return current
    except BaseException:
        os.close(current)
        raise


def _replace(parent: int, name: str, data: bytes) -> None:
    """Write `data` to a new file next to `name`, then rename it over `name`: a hard link to the old
    file elsewhere keeps the old content, and a symlink put at `name` is replaced, not followed."""
    keep: int | None = None
    try:
        info = os.stat(name, dir_fd=parent, follow_symlinks=False)
        if stat.S_ISREG(info.st_mode):
            keep = stat.S_IMODE(info.st_mode)
    except FileNotFoundError:
        pass
    temp = f".{name}.{uuid.uuid4().hex[:12]}.tmp"
    # A new file gets 0666 less the umask, as `open` would; a replaced one keeps its mode.
    fd = open_at(parent, temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666 if keep is None else 0o600)
    try:
        with os.fdopen(fd, "wb") as handle:
            if keep is not None:
                os.fchmod(handle.fileno(), keep)
            handle.write(data)
        os.rename(temp, name, src_dir_fd=parent, dst_dir_fd=parent)
    except BaseException:
        try:
            os.unlink(temp, dir_fd=parent)
        except OSError:
            pass
        raise


def file_write(ctx: LocalToolContext, args: dict[str, Any]) -> ToolResult:
    if blocked_by_readonly(ctx.risk, "file_write"):
        return ToolResult.fail(readonly_refusal("file_write"))
    try:
        raw = _path_argument(args)
        content = args.get("content")
        if content is None:
            raise _BadArgument("Missing 'content' parameter")
        if not isinstance(content, str):
            raise _BadArgument("'content' must be a string")
        access = resolve_access(ctx, raw, for_write=True)
    except _BadArgument as exc:
        return ToolResult.fail(str(exc))
    except PathDenied as exc:
        return ToolResult.fail(exc.message)
    target = access.path
    if target.is_dir():
        return ToolResult.fail(f"Path '{raw}' is a directory")
    if target.exists() and not target.is_file():
        return ToolResult.fail(f"Path '{raw}' is not a regular file")
    if access.relative == ".":
        return ToolResult.fail(f"Path '{raw}' is a directory")
    data = content.encode("utf-8")
    try:
        base = open_base(access.base)
        try:
            parent = _parent_fd(base, access.relative)
        finally:
            os.close(base)
        try:
            _replace(parent, target.name, data)
        finally:
            os.close(parent)
    except OSError as exc:
        return _denied(raw, exc) or _io_error("write", raw, exc)
    return ToolResult.ok(f"Wrote {len(data)} bytes to '{raw}'")


def file_list(ctx: LocalToolContext, args: dict[str, Any]) -> ToolResult:
    try:
        raw = _path_argument(args, default=".")
        access = resolve_access(ctx, raw, for_write=False)
    except _BadArgument as exc:
        return ToolResult.fail(str(exc))
    except PathDenied as exc:
        return ToolResult.fail(exc.message)
    try:
        base = open_base(access.base)
        try:
            fd = open_at(base, access.relative, os.O_RDONLY | os.O_NONBLOCK)
        finally:
            os.close(base)
    except FileNotFoundError:
        return ToolResult.fail(f"Path '{raw}' does not exist")
    except OSError as exc:
        return _denied(raw, exc) or _io_error("list", raw, exc)
    try:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            return ToolResult.fail(f"Path '{raw}' is not a directory")
        with os.scandir(fd) as entries:
            # Not following symlinks: a link's target may lie outside anything the profile grants.
            found = [(e.name, e.is_dir(follow_symlinks=False)) for e in entries]
    except OSError as exc:
        return _io_error("list", raw, exc)
    finally:
        os.close(fd)
    names = [name + "/" if is_dir else name for name, is_dir in sorted(found)]
    if not names:
        return ToolResult.ok(EMPTY_DIRECTORY)
    lines = names[:MAX_LIST_ENTRIES]
    if len(names) > MAX_LIST_ENTRIES:
        lines.append(f"[... {len(names) - MAX_LIST_ENTRIES} more entries]")
    return ToolResult.ok("\n".join(lines))
