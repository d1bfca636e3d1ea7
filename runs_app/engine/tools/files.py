"""`file_read`, `file_write` and `file_list`: file access inside what the risk profile allows."""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

from policies_app.policy import blocked_by_readonly, readonly_refusal
from runs_app.engine.tools.base import LocalToolContext, ToolResult
from runs_app.engine.tools.paths import PathDenied, resolve_path

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


def file_read(ctx: LocalToolContext, args: dict[str, Any]) -> ToolResult:
    try:
        raw = _path_argument(args)
        limit = _read_limit(args)
        target = resolve_path(ctx, raw, for_write=False)
    except _BadArgument as exc:
        return ToolResult.fail(str(exc))
    except PathDenied as exc:
        return ToolResult.fail(exc.message)
    try:
        info = target.stat()
        if stat.S_ISDIR(info.st_mode):
            return ToolResult.fail(f"Path '{raw}' is a directory")
        # A FIFO or device would block or never end.
        if not stat.S_ISREG(info.st_mode):
            return ToolResult.fail(f"Path '{raw}' is not a regular file")
        with target.open("rb") as handle:
            data = handle.read(limit + 1)
    except FileNotFoundError:
        return ToolResult.fail(f"Path '{raw}' does not exist")
    except OSError as exc:
        return _io_error("read", raw, exc)
    text = data[:limit].decode("utf-8", errors="replace")
    if len(data) > limit:
        size = max(info.st_size, len(data))
        text += f"\n[truncated: showing the first {limit} of {size} bytes]"
    return ToolResult.ok(text)


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
        target = resolve_path(ctx, raw, for_write=True)
    except _BadArgument as exc:
        return ToolResult.fail(str(exc))
    except PathDenied as exc:
        return ToolResult.fail(exc.message)
    if target.is_dir():
        return ToolResult.fail(f"Path '{raw}' is a directory")
    if target.exists() and not target.is_file():
        return ToolResult.fail(f"Path '{raw}' is not a regular file")
    data = content.encode("utf-8")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    except OSError as exc:
        return _io_error("write", raw, exc)
    return ToolResult.ok(f"Wrote {len(data)} bytes to '{raw}'")


def _entry_name(entry: Path) -> str:
    try:
        return entry.name + "/" if entry.is_dir() else entry.name
    except OSError:
        return entry.name


def file_list(ctx: LocalToolContext, args: dict[str, Any]) -> ToolResult:
    try:
        raw = _path_argument(args, default=".")
        target = resolve_path(ctx, raw, for_write=False)
    except _BadArgument as exc:
        return ToolResult.fail(str(exc))
    except PathDenied as exc:
        return ToolResult.fail(exc.message)
    if not target.exists():
        return ToolResult.fail(f"Path '{raw}' does not exist")
    if not target.is_dir():
        return ToolResult.fail(f"Path '{raw}' is not a directory")
    try:
        names = [_entry_name(entry) for entry in sorted(target.iterdir(), key=lambda e: e.name)]
    except OSError as exc:
        return _io_error("list", raw, exc)
    if not names:
        return ToolResult.ok(EMPTY_DIRECTORY)
    lines = names[:MAX_LIST_ENTRIES]
    if len(names) > MAX_LIST_ENTRIES:
        lines.append(f"[... {len(names) - MAX_LIST_ENTRIES} more entries]")
    return ToolResult.ok("\n".join(lines))
