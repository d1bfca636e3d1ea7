"""Real MCP servers for the tests: where `make mcp-servers` installed them, and configuration
rows that grant them (written directly, beside a TOML configuration).

Without the servers the MCP tests skip, except under CI=true, where they fail."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

from agents_app.models import Agent, McpBundle, McpServer, McpSettings
from agents_app.selectors import config_snapshot_forget

MCP_DIR = Path(os.environ.get("MCP_SERVERS_DIR") or Path.home() / ".cache/clawboard/mcp")
NODE_MODULES = MCP_DIR / "node_modules" / "@modelcontextprotocol"
FILESYSTEM_JS = NODE_MODULES / "server-filesystem" / "dist" / "index.js"
EVERYTHING_JS = NODE_MODULES / "server-everything" / "dist" / "index.js"
TIME_SERVER = MCP_DIR / "venv" / "bin" / "mcp-server-time"
MISBEHAVING = Path(__file__).parent / "mcp_fixtures" / "misbehaving_server.py"


def require_servers() -> None:
    missing = [str(p) for p in (FILESYSTEM_JS, EVERYTHING_JS, TIME_SERVER) if not p.exists()]
    if not missing:
        return
    reason = f"MCP servers not installed ({', '.join(missing)}); run `make mcp-servers`"
    if os.environ.get("CI") == "true":
        pytest.fail(reason)
    pytest.skip(reason)


def filesystem(name: str = "filesystem", *dirs: str, **fields: Any) -> dict[str, Any]:
    return {"name": name, "command": "node", "args": [str(FILESYSTEM_JS), *dirs], **fields}


def everything(name: str = "everything", **fields: Any) -> dict[str, Any]:
    return {"name": name, "command": "node", "args": [str(EVERYTHING_JS), "stdio"], **fields}


def time_server(name: str = "time", **fields: Any) -> dict[str, Any]:
    return {"name": name, "command": str(TIME_SERVER), "args": ["--local-timezone", "UTC"], **fields}


def misbehaving(name: str = "bad", **fields: Any) -> dict[str, Any]:
    return {"name": name, "command": sys.executable, "args": [str(MISBEHAVING)], **fields}


def grant(agents: dict[str, list[str]], *servers: dict[str, Any], deferred: bool = False) -> None:
    """MCP server rows, one bundle per agent holding the servers listed for it, and the agents'
    `mcp_bundles` set to it; then the configuration snapshot is read again."""
    McpSettings.objects.update_or_create(pk=1, defaults={"enabled": True, "deferred_loading": deferred})
    for server in servers:
        McpServer.objects.update_or_create(
            name=server["name"], defaults={k: v for k, v in server.items() if k != "name"}
        )
    for alias, names in agents.items():
        McpBundle.objects.update_or_create(alias=f"b-{alias}", defaults={"servers": names, "exclude": []})
        Agent.objects.filter(alias=alias).update(mcp_bundles=[f"b-{alias}"])
    config_snapshot_forget()


def set_risk(alias: str, **fields: Any) -> None:
    """Tool lists holding MCP names, written to the row: today's TOML import leaves `__` names
    out of tool lists (the MCP configuration work changes that)."""
    from policies_app.models import RiskProfile

    RiskProfile.objects.filter(alias=alias).update(**fields)
    config_snapshot_forget()


RAW = Path(__file__).parent / "mcp_fixtures" / "raw_server.py"


def raw(name: str = "raw", **fields: Any) -> dict[str, Any]:
    return {"name": name, "command": sys.executable, "args": [str(RAW)], **fields}
