"""What each model call of a run was sent and what it answered (the trace view's generation
view), built from the run's stored transcript, with every secret the configuration knows
replaced by `[secret]` (docs/operator-guide.md, "The detail panel")."""

from __future__ import annotations

import logging
import os
import re
from typing import Any

from agents_app.secrets import provider_api_key
from agents_app.selectors import config_snapshot_get

log = logging.getLogger(__name__)

SECRET = "[secret]"
# Credentials shaped as the usual providers write them, whatever the configuration says.
SECRET_SHAPES = re.compile(
    r"\b(?:sk|pk|rk)-[A-Za-z0-9_\-]{16,}|\bBearer\s+[A-Za-z0-9._~+/\-]{12,}=*|\bgh[pousr]_[A-Za-z0-9]{20,}"
)


def known_secrets() -> list[str]:
    """The provider keys in use (from their environment variables or kept encrypted), and
    the values of MCP servers' env and headers: longest first, so none hides inside another."""
    found: set[str] = set()
    try:
        snap = config_snapshot_get()
    except Exception:  # a configuration that cannot load hides nothing more, but never fails the page
        log.exception("secrets: could not read the configuration")
        return []
    for spec in snap.providers.values():
        if spec.api_key_env and (value := os.environ.get(spec.api_key_env)):
            found.add(value)
        if spec.api_key:
            try:
                found.add(provider_api_key(spec))
            except Exception:  # a key that cannot be decrypted is not shown either way
                log.warning("secrets: provider %s key unreadable", spec.alias)
    mcp = getattr(snap, "mcp_servers", None) or {}
    servers = mcp.values() if isinstance(mcp, dict) else mcp
    for server in servers:
        for table in ("env", "headers"):
            values = getattr(server, table, None) or {}
            found.update(str(v) for v in dict(values).values())
    return sorted((s for s in found if len(s) >= 6), key=len, reverse=True)


def redact(text: str, secrets: list[str]) -> str:
    for secret in secrets:
        text = text.replace(secret, SECRET)
    return SECRET_SHAPES.sub(SECRET, text)


def _plain(value: Any, secrets: list[str]) -> Any:
    if isinstance(value, str):
        return redact(value, secrets)
    if isinstance(value, list):
        return [_plain(v, secrets) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v, secrets) for k, v in value.items()}
    return value


def model_exchanges(
    system_prompt: str, messages: list[dict[str, Any]], calls: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Each model call of `calls` (selectors.run_model_calls, in order) with `sent`, the
    messages the model was given at that turn (the system prompt, then the transcript up to
    its answer), and `answer`, the assistant message it returned (text and tool calls).
    Pure: `messages` are selectors.run_transcript's, oldest first."""
    secrets = known_secrets()
    answers = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
    # A continued run starts with its predecessor's conversation, answers included: its own
    # calls answered the last len(calls) assistant messages.
    # (A call whose answer is not in the transcript, e.g. one still in flight, has none.)
    answers = answers[-len(calls) :] if calls else []
    matched: list[int | None] = [None] * (len(calls) - len(answers)) + list(answers)
    system = (
        [{"role": "system", "content": redact(system_prompt, secrets), "tool_calls": None}]
        if system_prompt
        else []
    )
    out: list[dict[str, Any]] = []
    for call, at in zip(calls, matched, strict=True):
        if at is None:
            out.append({**call, "sent": [], "answer_text": "", "answer_calls": []})
            continue
        sent = system + [
            {
                "role": m["role"],
                "content": redact(m["content"] or "", secrets),
                "tool_calls": _plain(m["tool_calls"], secrets),
            }
            for m in messages[:at]
        ]
        answer = messages[at]
        out.append(
            {
                **call,
                "sent": sent,
                "answer_text": redact(answer["content"] or "", secrets),
                "answer_calls": _plain(answer["tool_calls"] or [], secrets),
            }
        )
    return out
