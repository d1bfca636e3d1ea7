"""Dashboard forms for risk and runtime profiles, including the tool permission grid."""

from __future__ import annotations

from typing import Any

from django import forms

from agents_app.web import lines, without_null_character_check
from policies_app.policy import ALL_TOOLS, WILDCARD
from policies_app.presets import PRESETS
from policies_app.specs import DEFAULT_SHELL_LIMITS, SANDBOX_BACKENDS

LIST_FIELDS = (
    "allowed_roots",
    "allowed_roots_read_only",
    "allowed_roots_write_only",
    "forbidden_paths",
    "allowed_commands",
    "shell_env_passthrough",
    "firejail_args",
)
GRID_COLUMNS = (
    ("allowed_tools", "allow"),
    ("excluded_tools", "exclude"),
    ("always_ask", "ask"),
    ("auto_approve", "auto"),
)


class RiskProfileForm(forms.Form):
    alias = forms.CharField(max_length=64)
    preset = forms.ChoiceField(choices=[("", "—")] + [(p, p) for p in PRESETS], required=False)
    level = forms.ChoiceField(
        choices=[(x, x) for x in ("readonly", "supervised", "full")], initial="supervised"
    )
    workspace_only = forms.BooleanField(required=False, initial=True)
    block_high_risk_commands = forms.BooleanField(required=False, initial=True)
    require_approval_for_medium_risk = forms.BooleanField(required=False, initial=True)
    delegation_mode = forms.ChoiceField(
        choices=[("forbidden", "forbidden"), ("allow", "allow")],
        initial="forbidden",
        label="delegation_policy.mode",
    )
    deny_all_tools = forms.BooleanField(required=False)
    shell_network = forms.BooleanField(required=False, help_text="let shell reach the network")
    sandbox_enabled = forms.BooleanField(
        required=False, initial=True, help_text="off runs shell with no OS sandbox: not recommended"
    )
    sandbox_backend = forms.ChoiceField(
        choices=[(b, b) for b in SANDBOX_BACKENDS], initial="auto", required=False
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for name in LIST_FIELDS:
            self.fields[name] = forms.CharField(
                widget=forms.Textarea(attrs={"rows": 3}), required=False, help_text="one per line"
            )
        without_null_character_check(self)

    def grid(self) -> dict[str, list[str]]:
        """The four tool lists from the permission grid's checkboxes (`allow__shell`, `ask__*`)."""
        out: dict[str, list[str]] = {}
        for field, column in GRID_COLUMNS:
            picked = [t for t in (*ALL_TOOLS, WILDCARD) if self.data.get(f"{column}__{t}")]
            # Rows for names outside the registry (saved before names were checked) come back
            # too, so the validator reports them rather than the form dropping them silently.
            prefix = f"{column}__"
            extra = sorted(
                key[len(prefix) :]
                for key in self.data
                if key.startswith(prefix) and key[len(prefix) :] not in picked and self.data.get(key)
            )
            out[field] = picked + extra
        return out

    def to_body(self) -> dict[str, Any]:
        d = self.cleaned_data
        body: dict[str, Any] = {
            "alias": d["alias"].strip(),
            "level": d["level"],
            "workspace_only": d["workspace_only"],
            "block_high_risk_commands": d["block_high_risk_commands"],
            "require_approval_for_medium_risk": d["require_approval_for_medium_risk"],
            "delegation_policy": {"mode": d["delegation_mode"]},
            "deny_all_tools": d["deny_all_tools"],
            "shell_network": d["shell_network"],
            "sandbox_enabled": d["sandbox_enabled"],
            "sandbox_backend": d["sandbox_backend"] or "auto",
        }
        for name in LIST_FIELDS:
            body[name] = lines(d[name])
        body.update(self.grid())
        return body


def risk_initial(entry: dict[str, Any]) -> dict[str, Any]:
    initial = {k: v for k, v in entry.items() if k not in LIST_FIELDS}
    initial["delegation_mode"] = (entry.get("delegation_policy") or {}).get("mode", "forbidden")
    for name in LIST_FIELDS:
        initial[name] = "\n".join(entry.get(name, []))
    return initial


def _shell_limit(unit: str) -> forms.IntegerField:
    return forms.IntegerField(min_value=0, initial=0, required=False, help_text=f"{unit}0 = default")


class RuntimeProfileForm(forms.Form):
    alias = forms.CharField(max_length=64)
    agentic = forms.BooleanField(required=False)
    max_tool_iterations = forms.IntegerField(min_value=0, initial=0, help_text="0 = 10")
    max_actions_per_hour = forms.IntegerField(min_value=0, initial=20, help_text="0 blocks every action")
    max_cost_per_day_cents = forms.IntegerField(min_value=0, initial=500)
    shell_timeout_secs = forms.IntegerField(min_value=0, initial=60)
    max_delegation_depth = forms.IntegerField(min_value=0, initial=0, help_text="0 = 3")
    delegation_timeout_secs = forms.IntegerField(
        min_value=0, required=False, help_text="empty = [delegate].timeout_secs"
    )
    agentic_timeout_secs = forms.IntegerField(
        min_value=0, required=False, help_text="empty = [delegate].agentic_timeout_secs"
    )
    parallel_tools = forms.BooleanField(required=False)
    max_tool_result_chars = forms.IntegerField(min_value=0, initial=0, help_text="0 = 6000")
    tool_call_dedup_exempt = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), required=False)
    max_spawn_depth = forms.IntegerField(initial=1, help_text="1..5")
    max_children_per_run = forms.IntegerField(initial=5, help_text="1..20")
    subagent_timeout_secs = forms.IntegerField(min_value=0, initial=0, help_text="0 = none")
    max_output_tokens = forms.IntegerField(min_value=0, initial=0, help_text="0 = none")
    # Not required: a form posted before these existed keeps the defaults.
    shell_max_cpu_secs = _shell_limit("")
    shell_max_memory_mb = _shell_limit("address space, MiB; ")
    shell_max_file_size_mb = _shell_limit("MiB; ")
    shell_max_processes = _shell_limit("")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        without_null_character_check(self)

    def to_body(self) -> dict[str, Any]:
        body = dict(self.cleaned_data)
        for name in DEFAULT_SHELL_LIMITS:
            body[name] = body[name] or 0
        body["alias"] = body["alias"].strip()
        body["tool_call_dedup_exempt"] = lines(body["tool_call_dedup_exempt"])
        return body


def runtime_initial(entry: dict[str, Any]) -> dict[str, Any]:
    initial = dict(entry)
    initial["tool_call_dedup_exempt"] = "\n".join(entry.get("tool_call_dedup_exempt", []))
    return initial
