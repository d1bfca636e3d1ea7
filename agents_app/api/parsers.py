"""Request parsers and renderers of the configuration API.

`JSONParser` turns a body nested too deeply for Python's `json` module into a 400: the stock
parser only catches ValueError, and the RecursionError it lets through would be a 500."""

from __future__ import annotations

import json
from typing import Any

import tomlkit
from rest_framework import parsers, renderers
from rest_framework.exceptions import ParseError


class JSONParser(parsers.JSONParser):
    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        try:
            return super().parse(stream, media_type, parser_context)
        except RecursionError as exc:
            raise ParseError("JSON parse error - the body nests too deeply") from exc


class TomlText(str):
    """A TOML body, told apart from a JSON body that is a bare string."""


class TomlParser(parsers.BaseParser):
    """The body as text; `config_io.parse_toml` reads it (and reports line and column)."""

    media_type = "application/toml"

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        raw = stream.read() if stream is not None else b""
        try:
            return TomlText(raw.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise ParseError("the TOML body is not valid UTF-8") from exc


def _without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list | tuple):
        return [_without_nulls(v) for v in value if v is not None]
    return value


class TomlRenderer(renderers.BaseRenderer):
    """Text is sent as it is (the export); anything else (an error body) as a TOML document."""

    media_type = "application/toml"
    format = "toml"
    charset = "utf-8"

    def render(self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None) -> Any:
        if data is None:
            return b""
        if isinstance(data, str):
            return data.encode("utf-8")
        plain = json.loads(json.dumps(data, default=str))
        if isinstance(plain, dict):
            return tomlkit.dumps(_without_nulls(plain)).encode("utf-8")
        return json.dumps(plain).encode("utf-8")
