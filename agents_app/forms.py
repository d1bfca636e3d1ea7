"""Dashboard forms: typed input in, the entry's JSON form (as REST takes it) out."""

from __future__ import annotations

import json
from typing import Any

from django import forms

from agents_app.snapshot import ALIAS_RE, MCP_TRANSPORTS, ConfigSnapshot
from agents_app.web import lines, without_null_character_check

MODES = [("bounded", "bounded"), ("independent", "independent")]
ALIAS_IN_WORDS = (
    '"{alias}" cannot be an alias: use 1 to 64 lowercase letters, digits, "-" or "_", '
    "starting with a letter or a digit."
)


class AgentForm(forms.Form):
    alias = forms.CharField(max_length=64)
    enabled = forms.BooleanField(required=False, initial=True)
    model_provider = forms.ChoiceField(choices=[])
    risk_profile = forms.ChoiceField(choices=[], required=False)
    runtime_profile = forms.ChoiceField(choices=[], required=False)
    system_prompt = forms.CharField(widget=forms.Textarea(attrs={"rows": 4}), required=False)
    delegate_same_risk_profile = forms.BooleanField(required=False, initial=True)
    read_memory_from = forms.MultipleChoiceField(
        choices=[], required=False, widget=forms.CheckboxSelectMultiple
    )
    workspace = forms.CharField(required=False, help_text="empty = <DATA_DIR>/agents/<alias>/workspace")
    delegable = forms.BooleanField(required=False, initial=True)
    mcp_bundles = forms.MultipleChoiceField(
        choices=[],
        required=False,
        widget=forms.CheckboxSelectMultiple,
        label="MCP bundles",
        help_text="no bundle = no MCP server",
    )

    def __init__(self, *args: Any, snapshot: ConfigSnapshot, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.snapshot = snapshot
        # A reference to something that is not (or no longer) configured stays selectable, so
        # the §2.5 validator reports it with its exact message rather than "Select a valid choice".
        self._choices("model_provider", [("", "—")] + self._refs("model_provider", snapshot.providers))
        self._choices("risk_profile", [("", "—")] + self._refs("risk_profile", snapshot.risk_profiles))
        self._choices(
            "runtime_profile",
            [("", "(runtime defaults)")] + self._refs("runtime_profile", snapshot.runtime_profiles),
        )
        self._choices("read_memory_from", [(a, a) for a in snapshot.agents])
        wanted = list(self.initial.get("mcp_bundles") or []) + (
            self.data.getlist("mcp_bundles") if self.data else []  # type: ignore[attr-defined]
        )
        bundles = list(snapshot.mcp_bundles) + [b for b in wanted if b not in snapshot.mcp_bundles]
        self._choices("mcp_bundles", [(b, b) for b in dict.fromkeys(bundles)])
        self.fields["model_provider"].required = False
        without_null_character_check(self)

    def _refs(self, name: str, configured: Any) -> list[tuple[str, str]]:
        values = sorted(configured)
        current = self.initial.get(name) or (self.data.get(name) if self.data else "")
        if isinstance(current, str) and current and current not in values:
            values.append(current)
        return [(v, v) for v in values]

    def _choices(self, name: str, choices: list[tuple[str, str]]) -> None:
        field = self.fields[name]
        assert isinstance(field, forms.ChoiceField)
        field.choices = choices

    def clean_alias(self) -> str:
        """The alias rule in plain words (the API gives the pattern itself)."""
        alias: str = self.cleaned_data["alias"].strip()
        if not ALIAS_RE.fullmatch(alias):
            raise forms.ValidationError(ALIAS_IN_WORDS.format(alias=alias))
        return alias

    def delegates(self) -> list[dict[str, str]]:
        data: Any = self.data
        agents = data.getlist("delegate_agent") if data else []
        modes = data.getlist("delegate_mode") if data else []
        out = []
        for i, agent in enumerate(agents):
            if agent.strip():
                out.append({"agent": agent.strip(), "mode": modes[i] if i < len(modes) else "bounded"})
        return out

    def to_body(self) -> dict[str, Any]:
        d = self.cleaned_data
        return {
            "alias": d["alias"].strip(),
            "enabled": d["enabled"],
            "model_provider": d["model_provider"],
            "risk_profile": d["risk_profile"],
            "runtime_profile": d["runtime_profile"],
            # Browsers send a textarea's newlines as CRLF; the prompt means LF.
            "system_prompt": d["system_prompt"].replace("\r\n", "\n"),
            "delegate_same_risk_profile": d["delegate_same_risk_profile"],
            "delegates": self.delegates(),
            "read_memory_from": list(d["read_memory_from"]),
            "workspace": d["workspace"].strip(),
            "delegable": d["delegable"],
            "mcp_bundles": list(d["mcp_bundles"]),
        }


def agent_initial(entry: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in entry.items() if k != "delegates"}


class ProviderForm(forms.Form):
    type = forms.CharField(
        max_length=32, help_text="scripted, openai, anthropic, ollama, vllm, openrouter, …"
    )
    alias = forms.CharField(max_length=64)
    model = forms.CharField(required=False)
    uri = forms.CharField(required=False, label="URI")
    api_key_env = forms.CharField(required=False, label="API key environment variable")
    api_key = forms.CharField(
        required=False,
        strip=False,
        label="API key (stored encrypted)",
        widget=forms.PasswordInput(render_value=True, attrs={"autocomplete": "off"}),
        help_text="leave ******** to keep the stored key; empty = none; the variable above wins when set",
    )
    temperature = forms.FloatField(required=False)
    timeout_secs = forms.IntegerField(min_value=1, initial=60)
    max_tokens = forms.IntegerField(required=False, min_value=1)
    input_per_mtok_cents = forms.FloatField(min_value=0, initial=0, label="Input cents per million tokens")
    output_per_mtok_cents = forms.FloatField(min_value=0, initial=0, label="Output cents per million tokens")
    fallback_models = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), required=False)
    fallback = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 2}), required=False, help_text="one <type>.<alias> per line"
    )
    script = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 8}), required=False, help_text="JSON (scripted only)"
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        without_null_character_check(self)

    def clean_script(self) -> Any:
        raw = self.cleaned_data.get("script") or ""
        if not raw.strip():
            return []
        try:
            return json.loads(raw)
        except json.JSONDecodeError as exc:
            raise forms.ValidationError(
                f"script must be JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
            ) from exc

    def to_body(self) -> dict[str, Any]:
        d = self.cleaned_data
        body: dict[str, Any] = {
            "type": d["type"].strip(),
            "alias": d["alias"].strip(),
            "model": d["model"],
            "uri": d["uri"],
            "api_key_env": d["api_key_env"],
            "api_key": d["api_key"],
            "temperature": d["temperature"],
            "timeout_secs": d["timeout_secs"],
            "max_tokens": d["max_tokens"],
            "pricing": {
                "input_per_mtok_cents": float(d["input_per_mtok_cents"] or 0),
                "output_per_mtok_cents": float(d["output_per_mtok_cents"] or 0),
            },
            "fallback_models": lines(d["fallback_models"]),
            "fallback": lines(d["fallback"]),
            "script": d["script"],
        }
        return body


def provider_initial(entry: dict[str, Any]) -> dict[str, Any]:
    initial = dict(entry)
    pricing = initial.pop("pricing", {}) or {}
    initial["input_per_mtok_cents"] = pricing.get("input_per_mtok_cents", 0)
    initial["output_per_mtok_cents"] = pricing.get("output_per_mtok_cents", 0)
    initial["fallback_models"] = "\n".join(entry.get("fallback_models", []))
    initial["fallback"] = "\n".join(entry.get("fallback", []))
    initial["script"] = json.dumps(entry.get("script", []), indent=2) if entry.get("script") else ""
    return initial


def _pairs(text: str, separator: str, field: str) -> dict[str, str]:
    """`KEY<separator>value`, one per line, as a map; a line without the separator is an error."""
    out: dict[str, str] = {}
    for i, line in enumerate((text or "").splitlines(), start=1):
        if not line.strip():
            continue
        key, found, value = line.partition(separator)
        if not found:
            raise forms.ValidationError(f"{field} line {i} must be NAME{separator}value")
        out[key.strip()] = value.strip()
    return out


class McpServerForm(forms.Form):
    name = forms.CharField(max_length=64, help_text="tools appear as <name>__<tool>")
    transport = forms.ChoiceField(choices=[(t, t) for t in MCP_TRANSPORTS], initial="stdio")
    command = forms.CharField(required=False, help_text="stdio: an installed command (npx/uvx are resolved)")
    args = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), required=False, help_text="one per line")
    env = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3}),
        required=False,
        strip=False,
        help_text="NAME=value per line; ******** keeps the stored value, ${VAR} reads Clawboard's VAR",
    )
    url = forms.CharField(required=False, label="URL", help_text="http and sse: http(s)://…")
    headers = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3}),
        required=False,
        strip=False,
        help_text="Name: value per line; ******** keeps the stored value, ${VAR} reads Clawboard's VAR",
    )
    tool_timeout_secs = forms.IntegerField(required=False, help_text="1..600; empty = 180")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        without_null_character_check(self)

    def clean_env(self) -> dict[str, str]:
        return _pairs(self.cleaned_data.get("env", ""), "=", "env")

    def clean_headers(self) -> dict[str, str]:
        return _pairs(self.cleaned_data.get("headers", ""), ":", "headers")

    def to_body(self) -> dict[str, Any]:
        d = self.cleaned_data
        return {
            "name": d["name"].strip(),
            "transport": d["transport"],
            "command": d["command"].strip(),
            "args": [line.strip() for line in (d["args"] or "").splitlines() if line.strip()],
            "env": d["env"],
            "url": d["url"].strip(),
            "headers": d["headers"],
            "tool_timeout_secs": d["tool_timeout_secs"],
        }


def mcp_server_initial(entry: dict[str, Any]) -> dict[str, Any]:
    initial = dict(entry)
    initial["args"] = "\n".join(entry.get("args", []))
    initial["env"] = "\n".join(f"{k}={v}" for k, v in entry.get("env", {}).items())
    initial["headers"] = "\n".join(f"{k}: {v}" for k, v in entry.get("headers", {}).items())
    return initial


class McpBundleForm(forms.Form):
    alias = forms.CharField(max_length=64)
    servers = forms.MultipleChoiceField(choices=[], required=False, widget=forms.CheckboxSelectMultiple)
    exclude = forms.MultipleChoiceField(
        choices=[], required=False, widget=forms.CheckboxSelectMultiple, help_text="deny wins across bundles"
    )

    def __init__(self, *args: Any, snapshot: ConfigSnapshot, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for name in ("servers", "exclude"):
            # Names that are not (or no longer) configured stay visible, so the validator can say so.
            current = list(self.initial.get(name) or []) + (self.data.getlist(name) if self.data else [])  # type: ignore[attr-defined]
            values = list(snapshot.mcp_servers) + [v for v in current if v not in snapshot.mcp_servers]
            field = self.fields[name]
            assert isinstance(field, forms.MultipleChoiceField)
            field.choices = [(v, v) for v in dict.fromkeys(values)]
        without_null_character_check(self)

    def to_body(self) -> dict[str, Any]:
        d = self.cleaned_data
        return {"alias": d["alias"].strip(), "servers": list(d["servers"]), "exclude": list(d["exclude"])}


def mcp_bundle_initial(entry: dict[str, Any]) -> dict[str, Any]:
    return dict(entry)
