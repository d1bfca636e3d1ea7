from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from policies_app.escalation import (
    EscalationError,
    ensure_no_escalation_beyond,
    escalation_violation,
    path_within,
)
from policies_app.policy import SecurityPolicy
from policies_app.specs import RiskProfileSpec, RuntimeProfileSpec

PARENT_RISK = RiskProfileSpec(
    alias="parent",
    level="supervised",
    allowed_roots=("/srv/data",),
    allowed_roots_read_only=("/srv/docs",),
    allowed_roots_write_only=("/srv/out",),
    forbidden_paths=("/etc", "~/.ssh"),
    allowed_commands=("git", "ls", "/usr/local/bin/tool"),
    shell_env_passthrough=("HOME",),
    allowed_tools=("file_read", "file_write", "shell", "spawn_subagent"),
    always_ask=("shell",),
)
PARENT_RUNTIME = RuntimeProfileSpec(
    alias="parent", max_actions_per_hour=20, max_cost_per_day_cents=500, shell_timeout_secs=60
)
PARENT = SecurityPolicy(
    agent="main", risk=PARENT_RISK, runtime=PARENT_RUNTIME, workspace="/w", tracker_key="main"
)


def child(**changes: Any) -> SecurityPolicy:
    runtime_fields = {f.name for f in dataclasses.fields(RuntimeProfileSpec)}
    risk = dataclasses.replace(PARENT_RISK, **{k: v for k, v in changes.items() if k not in runtime_fields})
    runtime = dataclasses.replace(PARENT_RUNTIME, **{k: v for k, v in changes.items() if k in runtime_fields})
    return dataclasses.replace(PARENT, risk=risk, runtime=runtime)


def test_a_policy_never_escalates_beyond_itself() -> None:
    assert escalation_violation(PARENT, PARENT) is None
    ensure_no_escalation_beyond(PARENT, PARENT)


def test_a_strictly_narrower_child_passes() -> None:
    narrower = child(
        level="readonly",
        allowed_roots=("/srv/data/sub",),
        allowed_roots_read_only=("/srv/data", "/srv/docs/a"),
        allowed_roots_write_only=("/srv/out/x",),
        allowed_commands=("GIT",),
        forbidden_paths=("/etc", "~/.ssh", "/opt"),
        shell_env_passthrough=(),
        max_actions_per_hour=5,
        max_cost_per_day_cents=0,
        shell_timeout_secs=10,
        allowed_tools=("file_read",),
        always_ask=("shell", "file_read"),
    )
    assert escalation_violation(narrower, PARENT) is None


def test_subagent_cannot_raise_autonomy() -> None:
    assert (
        escalation_violation(child(level="full"), PARENT)
        == "subagent autonomy=Full exceeds parent's Supervised"
    )


def test_subagent_autonomy_message_names_readonly_parent() -> None:
    parent = child(level="readonly")
    assert (
        escalation_violation(child(level="supervised"), parent)
        == "subagent autonomy=Supervised exceeds parent's ReadOnly"
    )


def test_subagent_cannot_add_a_read_write_root_outside_the_parent() -> None:
    assert (
        escalation_violation(child(allowed_roots=("/srv/data/ok", "/srv/database")), PARENT)
        == 'subagent allowed_roots entry "/srv/database" is not contained within any of the parent\'s allowed_roots entries'
    )


def test_subagent_cannot_turn_a_read_only_root_into_a_read_write_root() -> None:
    assert (
        escalation_violation(child(allowed_roots=("/srv/docs",)), PARENT)
        == 'subagent allowed_roots entry "/srv/docs" is not contained within any of the parent\'s allowed_roots entries'
    )


def test_subagent_cannot_add_a_read_only_root_outside_the_parent() -> None:
    assert (
        escalation_violation(child(allowed_roots_read_only=("/srv/out",)), PARENT)
        == 'subagent allowed_roots_read_only entry "/srv/out" is not contained within the parent\'s allowed_roots or allowed_roots_read_only'
    )


def test_subagent_cannot_add_a_write_only_root_outside_the_parent() -> None:
    assert (
        escalation_violation(child(allowed_roots_write_only=("/srv/docs",)), PARENT)
        == 'subagent allowed_roots_write_only entry "/srv/docs" is not contained within the parent\'s allowed_roots or allowed_roots_write_only'
    )


def test_subagent_cannot_escape_a_root_with_dot_dot() -> None:
    assert (
        escalation_violation(child(allowed_roots=("/srv/data/../secret",)), PARENT)
        == 'subagent allowed_roots entry "/srv/data/../secret" is not contained within any of the parent\'s allowed_roots entries'
    )


def test_subagent_cannot_add_a_command() -> None:
    assert (
        escalation_violation(child(allowed_commands=("git", "rm")), PARENT)
        == 'subagent allowed_commands entry "rm" is not present on the parent\'s allowed_commands'
    )


def test_command_paths_are_compared_exactly() -> None:
    assert escalation_violation(child(allowed_commands=("/usr/local/bin/tool",)), PARENT) is None
    assert (
        escalation_violation(child(allowed_commands=("/usr/local/bin/TOOL",)), PARENT)
        == 'subagent allowed_commands entry "/usr/local/bin/TOOL" is not present on the parent\'s allowed_commands'
    )


def test_subagent_cannot_widen_commands_to_a_wildcard() -> None:
    assert (
        escalation_violation(child(allowed_commands=("*",)), PARENT)
        == 'subagent allowed_commands entry "*" is not present on the parent\'s allowed_commands'
    )


def test_a_wildcard_parent_covers_any_command() -> None:
    parent = child(allowed_commands=("*",))
    assert escalation_violation(child(allowed_commands=("rm", "/bin/sh")), parent) is None


def test_subagent_cannot_disable_workspace_only() -> None:
    assert (
        escalation_violation(child(workspace_only=False), PARENT)
        == "subagent attempts to disable workspace_only but the parent enforces it"
    )


def test_subagent_cannot_drop_a_forbidden_path() -> None:
    assert (
        escalation_violation(child(forbidden_paths=("/etc",)), PARENT)
        == 'subagent drops forbidden_paths entry "~/.ssh" that the parent enforces'
    )


def test_subagent_cannot_add_an_env_passthrough() -> None:
    assert (
        escalation_violation(child(shell_env_passthrough=("HOME", "AWS_SECRET")), PARENT)
        == 'subagent shell_env_passthrough entry "AWS_SECRET" is not present on the parent\'s list'
    )


def test_subagent_cannot_raise_actions_per_hour() -> None:
    assert (
        escalation_violation(child(max_actions_per_hour=21), PARENT)
        == "subagent max_actions_per_hour=21 exceeds parent's 20"
    )


def test_subagent_cannot_raise_cost_per_day() -> None:
    assert (
        escalation_violation(child(max_cost_per_day_cents=501), PARENT)
        == "subagent max_cost_per_day_cents=501 exceeds parent's 500"
    )


def test_subagent_cannot_raise_shell_timeout() -> None:
    assert (
        escalation_violation(child(shell_timeout_secs=61), PARENT)
        == "subagent shell_timeout_secs=61 exceeds parent's 60"
    )


def test_subagent_cannot_unblock_high_risk_commands() -> None:
    assert (
        escalation_violation(child(block_high_risk_commands=False), PARENT)
        == "subagent attempts to set block_high_risk_commands=false but the parent enforces it"
    )


def test_subagent_cannot_drop_medium_risk_approval() -> None:
    assert (
        escalation_violation(child(require_approval_for_medium_risk=False), PARENT)
        == "subagent attempts to set require_approval_for_medium_risk=false but the parent enforces it"
    )


def test_subagent_cannot_gain_a_tool() -> None:
    assert (
        escalation_violation(child(allowed_tools=("file_read", "memory_store", "delegate")), PARENT)
        == 'subagent tool "memory_store" is not available to the parent'
    )


def test_an_empty_child_allow_list_is_unrestricted_and_therefore_an_escalation() -> None:
    assert (
        escalation_violation(child(allowed_tools=()), PARENT)
        == 'subagent tool "file_list" is not available to the parent'
    )


def test_subagent_cannot_drop_an_always_ask_entry() -> None:
    assert (
        escalation_violation(child(always_ask=("file_read",)), PARENT)
        == 'subagent drops always_ask entry "shell" that the parent enforces'
    )


def test_a_child_always_ask_wildcard_keeps_every_parent_entry() -> None:
    assert escalation_violation(child(always_ask=("*",)), PARENT) is None


def test_the_first_violation_wins() -> None:
    everything = child(
        level="full",
        allowed_roots=("/",),
        max_actions_per_hour=1000,
        always_ask=(),
    )
    assert escalation_violation(everything, PARENT) == "subagent autonomy=Full exceeds parent's Supervised"
    later = child(shell_timeout_secs=600, always_ask=(), forbidden_paths=())
    assert (
        escalation_violation(later, PARENT)
        == 'subagent drops forbidden_paths entry "/etc" that the parent enforces'
    )


def test_ensure_no_escalation_beyond_wraps_the_violation() -> None:
    with pytest.raises(EscalationError) as excinfo:
        ensure_no_escalation_beyond(child(max_cost_per_day_cents=900), PARENT)
    assert (
        str(excinfo.value)
        == "subagent policy override escalates beyond parent: subagent max_cost_per_day_cents=900 exceeds parent's 500"
    )
    assert excinfo.value.violation == "subagent max_cost_per_day_cents=900 exceeds parent's 500"
    assert excinfo.value.message == str(excinfo.value)


@pytest.mark.parametrize(
    ("path", "root", "inside"),
    [
        ("/a", "/a", True),
        ("/a/b", "/a", True),
        ("/a/b/", "/a", True),
        ("/ab", "/a", False),
        ("/a/../b", "/a", False),
        ("/anything", "/", True),
        ("~/x", "~", True),
    ],
)
def test_path_containment(path: str, root: str, inside: bool) -> None:
    assert path_within(path, root) is inside


def test_subagent_cannot_turn_on_shell_network_when_the_parent_has_it_off() -> None:
    assert (
        escalation_violation(child(shell_network=True), PARENT)
        == "subagent attempts to set shell_network=true but the parent forbids it"
    )
    networked = dataclasses.replace(PARENT, risk=dataclasses.replace(PARENT_RISK, shell_network=True))
    assert escalation_violation(child(shell_network=False), networked) is None


def test_subagent_cannot_turn_the_sandbox_off_when_the_parent_has_it_on() -> None:
    assert (
        escalation_violation(child(sandbox_enabled=False), PARENT)
        == "subagent attempts to set sandbox_enabled=false but the parent enforces it"
    )
    with pytest.raises(EscalationError) as caught:
        ensure_no_escalation_beyond(child(sandbox_enabled=False), PARENT)
    assert caught.value.message == (
        "subagent policy override escalates beyond parent: "
        "subagent attempts to set sandbox_enabled=false but the parent enforces it"
    )


def test_subagent_cannot_raise_a_shell_sandbox_limit() -> None:
    assert (
        escalation_violation(child(shell_max_processes=500), PARENT)
        == "subagent shell_max_processes=500 exceeds parent's 64"
    )
    # 0 means the default, on either side.
    tight = dataclasses.replace(PARENT, runtime=dataclasses.replace(PARENT_RUNTIME, shell_max_memory_mb=512))
    assert escalation_violation(child(shell_max_memory_mb=0), tight) == (
        "subagent shell_max_memory_mb=2048 exceeds parent's 512"
    )
    assert escalation_violation(child(shell_max_cpu_secs=10, shell_max_file_size_mb=1), PARENT) is None
