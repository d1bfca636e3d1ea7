"""A run's MCP servers are frozen with its policy at admission."""

from __future__ import annotations

from agents_app.snapshot import McpServerSpec, ProviderSpec, SecretValue
from policies_app.specs import RiskProfileSpec, RuntimeProfileSpec
from runs_app.engine.frozen import FrozenPolicy


def test_a_policy_with_mcp_servers_round_trips_through_its_stored_json() -> None:
    provider = ProviderSpec(type="scripted", alias="p")
    server = McpServerSpec(
        name="fs", command="node", args=("a.js", "/w"), env={"K": SecretValue(token="gAAA")},
        headers={"H": SecretValue(env="VAR")}, tool_timeout_secs=5,
    )  # fmt: skip
    policy = FrozenPolicy(
        risk=RiskProfileSpec(alias="r"), runtime=RuntimeProfileSpec(alias="rt"), provider=provider,
        chain={provider.ref: provider}, mcp=(server,), mcp_deferred=True, mcp_ceilings=((("fs__x",), False),),
    )  # fmt: skip
    again = FrozenPolicy.from_json(policy.to_json())
    assert (
        again.mcp == (server,) and again.mcp[0].env == server.env and again.mcp[0].headers == server.headers
    )
    assert again.mcp_deferred is True and again.mcp_ceilings == ((("fs__x",), False),)


def test_a_policy_without_mcp_keeps_the_digest_it_had_before() -> None:
    provider = ProviderSpec(type="scripted", alias="p")
    policy = FrozenPolicy(
        RiskProfileSpec(alias="r"), RuntimeProfileSpec(alias="rt"), provider, {provider.ref: provider}
    )
    assert "mcp" not in policy.to_json()
