"""Which MCP servers an agent's bundles grant, and which they name but do not grant, with why.
The same resolution as `ConfigSnapshot.mcp_servers_of`, spelled out for the agent editor."""

from __future__ import annotations

from typing import Any

from agents_app.snapshot import AgentSpec, ConfigSnapshot


def mcp_grants(snap: ConfigSnapshot, agent: AgentSpec) -> list[dict[str, Any]]:
    """One row per server a bundle of the agent names: `granted`, the bundle, and the reason
    when it is not granted."""
    granted = {s.name for s in snap.mcp_servers_of(agent)}
    rows: dict[str, dict[str, Any]] = {}
    excluded_by: dict[str, str] = {}
    for alias in agent.mcp_bundles:
        bundle = snap.mcp_bundles.get(alias)
        for name in bundle.exclude if bundle else ():
            excluded_by.setdefault(name, alias)
    for alias in agent.mcp_bundles:
        bundle = snap.mcp_bundles.get(alias)
        if bundle is None:
            continue
        for name in bundle.servers:
            if name in rows:
                continue
            reason = ""
            if name not in granted:
                if name not in snap.mcp_servers:
                    reason = "not configured"
                elif name in excluded_by:
                    reason = f"excluded by mcp_bundles.{excluded_by[name]}.exclude"
                elif not snap.mcp.enabled:
                    reason = "[mcp] enabled = false"
            server = snap.mcp_servers.get(name)
            rows[name] = {
                "server": name,
                "bundle": alias,
                "granted": name in granted,
                "reason": reason,
                "transport": server.transport if server else "",
            }
    return list(rows.values())
