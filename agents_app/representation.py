"""JSON form of one configuration entry, as REST and the dashboard show it.

It is the TOML table of the entry with every field written out (plus `alias`, and `type` for
providers). Input goes back through `config_io.document_to_snapshot`, so REST, the dashboard
and TOML import share one parser and one set of type checks."""

from __future__ import annotations

import dataclasses
from typing import Any

from agents_app.secrets import MASK, secret_document_value
from agents_app.snapshot import (
    AgentSpec,
    ConfigSnapshot,
    McpBundleSpec,
    McpGlobals,
    McpServerSpec,
    ProviderSpec,
)
from policies_app.specs import DelegateGlobals, RiskProfileSpec, RuntimeProfileSpec

KINDS: tuple[str, ...] = (
    "agents",
    "risk_profiles",
    "runtime_profiles",
    "providers",
    "mcp_servers",
    "mcp_bundles",
)
# Shown, never taken back: the `env`/`headers` names whose value must be entered again.
READ_ONLY_KEYS: tuple[str, ...] = ("missing_secrets",)


def _plain(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    return value


def mcp_server_to_json(spec: McpServerSpec) -> dict[str, Any]:
    """A server as REST and the dashboard show it: each `env`/`headers` value as the mask, or
    `${VAR}` for a value read from Clawboard's environment."""
    return {
        "name": spec.name,
        "transport": spec.transport,
        "command": spec.command,
        "args": list(spec.args),
        "env": {k: secret_document_value(v, "mask") for k, v in spec.env.items()},
        "url": spec.url,
        "headers": {k: secret_document_value(v, "mask") for k, v in spec.headers.items()},
        "tool_timeout_secs": spec.tool_timeout_secs,
        "missing_secrets": [
            f"{field}.{k}"
            for field in ("env", "headers")
            for k, v in getattr(spec, field).items()
            if v.missing
        ],
    }


def entry_to_json(spec: Any) -> dict[str, Any]:
    if isinstance(spec, McpServerSpec):
        return mcp_server_to_json(spec)
    data = {f.name: _plain(getattr(spec, f.name)) for f in dataclasses.fields(spec)}
    if isinstance(spec, RiskProfileSpec):
        data["delegation_policy"] = {"mode": data.pop("delegation_mode")}
    elif isinstance(spec, ProviderSpec):
        # A stored key is never shown: the mask says one is there (send it back to keep it).
        data["api_key"] = MASK if spec.api_key else ""
        data["pricing"] = {
            "input_per_mtok_cents": data.pop("input_per_mtok_cents"),
            "output_per_mtok_cents": data.pop("output_per_mtok_cents"),
        }
    return data


def entries(snapshot: ConfigSnapshot, kind: str) -> dict[str, Any]:
    return dict(getattr(snapshot, kind))


def entry_to_document_body(data: dict[str, Any], kind: str) -> dict[str, Any]:
    """Strip the keys that live in the TOML section path rather than in the table."""
    body = dict(data)
    body.pop("alias", None)
    if kind == "providers":
        body.pop("type", None)
    if kind == "mcp_servers":
        body.pop("name", None)
        for key in READ_ONLY_KEYS:
            body.pop(key, None)
        if body.get("tool_timeout_secs") is None:
            body.pop("tool_timeout_secs", None)
    return body


def spec_types() -> dict[str, type]:
    return {
        "agents": AgentSpec,
        "risk_profiles": RiskProfileSpec,
        "runtime_profiles": RuntimeProfileSpec,
        "providers": ProviderSpec,
        "delegate": DelegateGlobals,
        "mcp_servers": McpServerSpec,
        "mcp_bundles": McpBundleSpec,
        "mcp": McpGlobals,
    }
