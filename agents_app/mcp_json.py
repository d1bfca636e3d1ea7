"""The `mcpServers` JSON of Claude Code and Cursor, and the `servers` JSON of VS Code, read as
`[[mcp.servers]]` entries (docs/configuration.md, "Importing mcpServers JSON").

    {"mcpServers": {"<name>": {"command", "args", "env"} | {"type", "url", "headers"}}}
    {"servers": {"<name>": {"type": "stdio" | "http" | "sse", ...}}}            (VS Code)

Variables: a value of `env` or `headers` that is exactly `${VAR}` (or VS Code's `${env:VAR}`)
stays a reference to Clawboard's environment variable VAR, read when the server starts; any
other `${VAR}`, `${VAR:-default}` or `${env:VAR}` is expanded from Clawboard's environment
when the file is imported (an unset variable without a default is an error naming the field).
The result is a document in Clawboard's own shape, read by `config_io.document_to_snapshot`
like every other input."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from agents_app.config_io import ConfigShapeError, ImportResult, document_to_snapshot
from agents_app.validation import quote

Error = tuple[str, str]

SHAPE_MESSAGE = (
    'expected a JSON object with "mcpServers" (Claude Code, Cursor) or "servers" (VS Code) '
    "mapping each server's name to its settings"
)
_TYPES: dict[str, str] = {
    "stdio": "stdio",
    "http": "http",
    "streamable-http": "http",
    "streamableHttp": "http",
    "sse": "sse",
}
_KNOWN_FIELDS = frozenset({"type", "command", "args", "env", "url", "headers"})
_VARIABLE = re.compile(r"\$\{([^}]*)\}")
_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_PLAIN = re.compile(rf"^(?:env:)?({_NAME})(?::-(.*))?$", re.DOTALL)


class _Reader:
    def __init__(self, environ: Mapping[str, str]) -> None:
        self.environ = environ
        self.errors: list[Error] = []
        self.warnings: list[str] = []

    def expand(self, path: str, text: str) -> str | None:
        failed = False

        def one(found: re.Match[str]) -> str:
            nonlocal failed
            inner = found.group(1)
            parsed = _PLAIN.match(inner)
            if parsed is None:
                failed = True
                what = "a VS Code prompt" if inner.startswith("input:") else "a variable"
                self.errors.append(
                    (path, f"{path} uses ${{{inner}}}, {what} that Clawboard cannot expand; write the value")
                )
                return ""
            name, default = parsed.group(1), parsed.group(2)
            if name in self.environ:
                return self.environ[name]
            if default is not None:
                return default
            failed = True
            self.errors.append(
                (path, f"{path} uses ${{{inner}}}, but {name} is not set in Clawboard's environment")
            )
            return ""

        expanded = _VARIABLE.sub(one, text)
        return None if failed else expanded

    def secret(self, path: str, text: str) -> str | None:
        whole = _VARIABLE.fullmatch(text)
        if whole is not None:
            parsed = _PLAIN.match(whole.group(1))
            if parsed is not None and parsed.group(2) is None:
                return f"${{{parsed.group(1)}}}"  # kept as a reference (agents_app.secrets)
        return self.expand(path, text)

    def string(self, path: str, value: Any) -> str | None:
        if not isinstance(value, str):
            self.errors.append((path, f"{path} must be a string"))
            return None
        return self.expand(path, value)

    def strings(self, path: str, value: Any) -> list[str] | None:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            self.errors.append((path, f"{path} must be a list of strings"))
            return None
        out = [self.expand(f"{path}[{i}]", v) for i, v in enumerate(value)]
        return None if any(v is None for v in out) else [str(v) for v in out]

    def secrets(self, path: str, value: Any) -> dict[str, str] | None:
        if not isinstance(value, Mapping) or not all(isinstance(v, str) for v in value.values()):
            self.errors.append((path, f"{path} must be an object of strings"))
            return None
        out = {str(k): self.secret(f"{path}.{k}", v) for k, v in value.items()}
        return None if any(v is None for v in out.values()) else {k: str(v) for k, v in out.items()}

    def server(self, base: str, name: str, raw: Any) -> dict[str, Any] | None:
        if not isinstance(raw, Mapping):
            self.errors.append((base, f"{base} must be an object"))
            return None
        for key in raw:
            if key not in _KNOWN_FIELDS:
                self.warnings.append(f"skipped unknown field {quote(f'{base}.{key}')}")
        kind = raw.get("type")
        if kind is None:
            if "command" in raw:
                kind = "stdio"
            elif "url" in raw:
                kind = "http"  # Cursor's remote entries: streamable HTTP, what current servers serve
            else:
                self.errors.append((base, f"{base} has neither command nor url"))
                return None
        if kind not in _TYPES:
            path = f"{base}.type"
            self.errors.append(
                (path, f"{path} = {quote(str(kind))} is not a known type; expected stdio, http or sse")
            )
            return None
        entry: dict[str, Any] = {"name": name, "transport": _TYPES[kind]}
        readers = {
            "command": self.string,
            "args": self.strings,
            "env": self.secrets,
            "url": self.string,
            "headers": self.secrets,
        }
        ok = True
        for key, read in readers.items():
            if key in raw:
                value = read(f"{base}.{key}", raw[key])
                ok = ok and value is not None
                entry[key] = value
        return entry if ok else None


def mcp_json_document(
    data: Any, environ: Mapping[str, str] | None = None
) -> tuple[dict[str, Any], list[str]]:
    """The Clawboard document (`{"mcp": {"servers": [...]}}`) of an mcpServers file, and its
    warnings; raises ConfigShapeError with every error."""
    if not isinstance(data, Mapping):
        raise ConfigShapeError([("", SHAPE_MESSAGE)])
    key = "mcpServers" if "mcpServers" in data else "servers" if "servers" in data else ""
    servers = data.get(key) if key else None
    if not isinstance(servers, Mapping):
        raise ConfigShapeError([(key, SHAPE_MESSAGE)])
    reader = _Reader(os.environ if environ is None else environ)
    for other in data:
        if other != key:
            reader.warnings.append(f"skipped unknown key {quote(str(other))}")
    entries = []
    for name, raw in servers.items():
        entry = reader.server(f"{key}.{name}", str(name), raw)
        if entry is not None:
            entries.append(entry)
    if reader.errors:
        raise ConfigShapeError(reader.errors)
    return {"mcp": {"servers": entries}}, reader.warnings


def mcp_json_read(data: Any, environ: Mapping[str, str] | None = None) -> ImportResult:
    """The servers of an mcpServers file as an import that adds them (or replaces those of the
    same name) and keeps everything else, the `[mcp]` switches included."""
    document, warnings = mcp_json_document(data, environ)
    result = document_to_snapshot(document)
    return ImportResult(
        snapshot=result.snapshot,
        warnings=warnings + result.warnings,
        sections_seen=("mcp",),
        has_delegate=False,
        has_mcp=False,
    )
