"""The delegation map draws who can reach whom; the simulator shows every gate and the exact refusal."""

from __future__ import annotations

import re

from django.test import Client

from tests.dashboard.support import text_of


def edges(client: Client, *, active: bool = True) -> set[tuple[str, str, str]]:
    """The map's edges from enabled callers (or, `active=False`, from disabled ones, greyed)."""
    body = client.get("/delegation-map/").content.decode()
    found = re.findall(
        r'data-source="([^"]+)" data-target="([^"]+)" data-mode="([^"]+)" data-explicit="[a-z]+" '
        r'data-active="([a-z]+)"',
        body,
    )
    return {(s, t, m) for s, t, m, a in found if (a == "true") == active}


def test_the_map_shows_bounded_and_independent_edges(viewer: Client) -> None:
    assert edges(viewer) == {
        ("alpha", "beta", "bounded"),
        ("alpha", "gamma", "independent"),
        ("beta", "alpha", "bounded"),
        ("gamma", "beta", "bounded"),
        ("verifier", "alpha", "bounded"),  # not delegable, but it may delegate itself
        ("verifier", "beta", "bounded"),
    }
    # disabled agents never run: their edges are drawn greyed
    assert edges(viewer, active=False) == {
        ("remote", "alpha", "bounded"),
        ("remote", "beta", "bounded"),
        ("sleeper", "alpha", "bounded"),
        ("sleeper", "beta", "bounded"),
    }
    body = viewer.get("/delegation-map/").content.decode()
    assert '<g class="agent-node" id="map-sleeper" data-enabled="false"' in body
    assert '<g class="agent-node" id="map-verifier" data-enabled="true" data-delegable="false"' in body
    assert re.search(r'id="map-loner"[^>]*data-forbidden="true"', body)


def test_allowing_delegation_adds_the_edge_to_the_map(admin: Client) -> None:
    assert ("loner", "beta", "bounded") not in edges(admin)
    response = admin.post(
        "/risk-profiles/solo/",
        {
            "alias": "solo",
            "level": "supervised",
            "workspace_only": "on",
            "block_high_risk_commands": "on",
            "require_approval_for_medium_risk": "on",
            "sandbox_enabled": "on",
            "delegation_mode": "allow",
            "allowed_commands": "git\nls",
        },
    )
    assert response.status_code == 302
    assert ("loner", "beta", "bounded") in edges(admin)


def simulate(client: Client, caller: str, target: str, **extra: str) -> str:
    response = client.post("/delegation-map/simulate/", {"caller": caller, "target": target, **extra})
    assert response.status_code == 200
    return text_of(response)


def refusal(body: str) -> str:
    found = re.search(r'<pre id="sim-refusal">(.*?)</pre>', body, re.S)
    assert found, body
    return found.group(1)


def test_the_simulator_shows_the_exact_refusal_of_each_gate(viewer: Client) -> None:
    assert refusal(simulate(viewer, "loner", "beta")) == (
        'delegation is forbidden for caller "loner" by risk profile "solo" delegation_policy; '
        'set [risk_profiles.solo].delegation_policy mode = "allow"'
    )
    assert refusal(simulate(viewer, "alpha", "nobody")) == (
        "Unknown agent 'nobody'. Available agents: beta, gamma"
    )
    assert refusal(simulate(viewer, "alpha", "loner")) == (
        'delegate target "loner" is not reachable from "alpha": different risk profile (caller uses "team", '
        'target uses "solo"). delegate_same_risk_profile only reaches agents with the same risk profile; add an '
        "explicit [agents.alpha].delegates entry with the intended mode, or change one agent's risk_profile."
    )
    assert refusal(simulate(viewer, "alpha", "verifier")) == (
        'delegate target "verifier" is not reachable from "alpha": the target agent is not delegable'
    )
    assert refusal(simulate(viewer, "alpha", "sleeper")) == (
        'delegate target "sleeper" is not reachable from "alpha": the target agent is disabled'
    )
    assert refusal(simulate(viewer, "alpha", "gamma")) == (
        'delegate target "gamma" cannot run in independent mode from "alpha": risk profile "asker" has '
        'always_ask entries (shell). See the documentation, "Delegation & SubAgents" > "What\'s not supported".'
    )
    assert refusal(simulate(viewer, "alpha", "beta", depth="3")) == (
        "Delegation depth limit reached (3/3). Cannot delegate further to prevent infinite loops."
    )
    assert refusal(simulate(viewer, "alpha", "beta", depth="3", background="on")) == (
        "Delegation depth limit reached (3/3)."
    )


def test_the_simulator_lists_every_gate_and_the_childs_tools_when_allowed(viewer: Client) -> None:
    body = simulate(viewer, "alpha", "beta")
    assert '<span class="badge status-completed">allowed</span> as <b>bounded</b>' in body
    gates = re.findall(r"<tr><td>([a-z_]+)</td><td>(pass|fail)</td>", body)
    assert gates and all(result == "pass" for _, result in gates)
    assert [g for g, _ in gates][:4] == ["known_agent", "depth", "delegation_policy", "reachability"]
    assert '<p id="sim-tools">(none: one model call, no tools)</p>' in body  # beta is not agentic
    failing = simulate(viewer, "loner", "beta")
    assert re.findall(r"<tr><td>([a-z_]+)</td><td>(pass|fail)</td>", failing) == [
        ("known_agent", "pass"),
        ("depth", "pass"),
        ("delegation_policy", "fail"),
    ]


def test_the_map_page_runs_the_simulator_from_its_query_string(viewer: Client) -> None:
    body = text_of(viewer.get("/delegation-map/?caller=loner&target=beta"))
    assert 'delegation is forbidden for caller "loner"' in body


def test_the_simulator_asks_for_a_caller_and_a_target(viewer: Client) -> None:
    assert "target: This field may not be blank." in simulate(viewer, "alpha", "  ")
    assert "caller: This field may not be blank." in simulate(viewer, "", "beta")
