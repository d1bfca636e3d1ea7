"""Shared configuration and helpers of the configuration-plane tests (REST, admin, commands)."""

from __future__ import annotations

from typing import Any

from rest_framework.test import APIClient

from agents_app.config_io import export_toml, parse_toml
from agents_app.models import Agent, ConfigRevision, ModelProvider
from agents_app.selectors import config_snapshot_get
from agents_app.services import config_replace
from agents_app.users import user_create_or_update
from policies_app.models import RiskProfile, RuntimeProfile

# alpha reaches beta and picky (same risk profile) and gamma (explicitly, independent);
# gamma's risk profile has always_ask entries; loner may not delegate at all; picky only
# reaches its explicit delegates (none); sleeper is disabled; verifier is not delegable;
# beta's runtime profile allows a delegation depth of 2.
BASE_TOML = """\
[providers.models.scripted.demo]
model = "demo-1"

[providers.models.scripted.spare]
model = "spare-1"

[risk_profiles.team]
excluded_tools = ["model_switch"]

[risk_profiles.team.delegation_policy]
mode = "allow"

[risk_profiles.solo]

[risk_profiles.asker]
always_ask = [" shell ", "", "file_write"]
auto_approve = ["*"]

[risk_profiles.asker.delegation_policy]
mode = "allow"

[runtime_profiles.agentic]
agentic = true

[runtime_profiles.shallow]
max_delegation_depth = 2

[agents.alpha]
model_provider = "scripted.demo"
risk_profile = "team"
runtime_profile = "agentic"
delegates = [{ agent = "gamma", mode = "independent" }]
read_memory_from = ["beta"]

[agents.beta]
model_provider = "scripted.demo"
risk_profile = "team"
runtime_profile = "shallow"

[agents.gamma]
model_provider = "scripted.demo"
risk_profile = "asker"
delegates = ["beta"]

[agents.loner]
model_provider = "scripted.demo"
risk_profile = "solo"

[agents.picky]
model_provider = "scripted.demo"
risk_profile = "team"
runtime_profile = "agentic"
delegate_same_risk_profile = false

[agents.sleeper]
model_provider = "scripted.demo"
risk_profile = "team"
enabled = false

[agents.verifier]
model_provider = "scripted.demo"
risk_profile = "team"
delegable = false
"""

BASE_AGENTS: tuple[str, ...] = ("alpha", "beta", "gamma", "loner", "picky", "sleeper", "verifier")


def load_base_config() -> None:
    config_replace(snapshot=parse_toml(BASE_TOML).snapshot, summary="base")


def config_state() -> dict[str, Any]:
    """Everything a refused save must leave as it was."""
    return {
        "toml": export_toml(config_snapshot_get()),
        "revisions": ConfigRevision.objects.count(),
        "agents": Agent.objects.count(),
        "providers": ModelProvider.objects.count(),
        "risk_profiles": RiskProfile.objects.count(),
        "runtime_profiles": RuntimeProfile.objects.count(),
    }


def api_client(role: str | None, username: str | None = None) -> APIClient:
    """An API client authenticated with a token of a fresh user of `role` (None: anonymous)."""
    client = APIClient()
    if role is not None:
        _, _, token = user_create_or_update(username=username or f"{role}-user", role=role)
        client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    return client


def agent_json(alias: str, **fields: Any) -> dict[str, Any]:
    """The REST representation of an agent: every field, defaults filled in."""
    data: dict[str, Any] = {
        "alias": alias,
        "model_provider": "",
        "risk_profile": "",
        "runtime_profile": "",
        "enabled": True,
        "system_prompt": "",
        "delegate_same_risk_profile": True,
        "delegates": [],
        "read_memory_from": [],
        "workspace": "",
        "delegable": True,
        "mcp_bundles": [],
    }
    data.update(fields)
    return data
