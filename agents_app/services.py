"""Write-side of the configuration. Every change goes through `config_update`: validate the
whole resulting snapshot (SPEC §2.5, all errors at once) and work out its TOML and diff, then
write it in one short transaction together with a revision (who, when, TOML, diff). Nothing
is half-written, and no write holds the database's write lock for longer than its writes."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db import connection, transaction

from agents_app.config_io import MAX_DOCUMENT_BYTES, diff_texts, export_toml, summarize_diff
from agents_app.models import Agent, ConfigRevision, McpBundle, McpServer, McpSettings, ModelProvider
from agents_app.secrets import resolve_secrets
from agents_app.selectors import config_snapshot_read
from agents_app.snapshot import AgentSpec, ConfigSnapshot, McpServerSpec, ProviderSpec, SecretValue
from agents_app.validation import validate_snapshot
from policies_app.models import DelegateSettings, RiskProfile, RuntimeProfile


class ConfigValidationError(Exception):
    def __init__(self, errors: list[tuple[str, str]]) -> None:
        super().__init__("; ".join(m for _, m in errors))
        self.errors = errors


def _plain(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value


def _spec_fields(spec: Any, *, skip: tuple[str, ...] = ()) -> dict[str, Any]:
    return {f.name: _plain(getattr(spec, f.name)) for f in dataclasses.fields(spec) if f.name not in skip}


def _agent_fields(spec: AgentSpec) -> dict[str, Any]:
    data = _spec_fields(spec, skip=("alias", "delegates"))
    data["delegates"] = [{"agent": d.agent, "mode": d.mode} for d in spec.delegates]
    return data


def _provider_fields(spec: ProviderSpec) -> dict[str, Any]:
    return _spec_fields(spec, skip=("type", "alias"))


def _secret_rows(values: dict[str, SecretValue]) -> dict[str, dict[str, str]]:
    """As McpServer keeps them: {"token": …} or {"env": …}; {} for a value to enter again."""
    rows: dict[str, dict[str, str]] = {}
    for key, value in values.items():
        if value.token:
            rows[key] = {"token": str(value.token)}
        elif value.env:
            rows[key] = {"env": value.env}
        else:
            rows[key] = {}
    return rows


def _mcp_server_fields(spec: McpServerSpec) -> dict[str, Any]:
    data = _spec_fields(spec, skip=("name", "env", "headers"))
    data["env"] = _secret_rows(spec.env)
    data["headers"] = _secret_rows(spec.headers)
    return data


def _write_mcp(old: ConfigSnapshot, new: ConfigSnapshot) -> None:
    McpServer.objects.filter(name__in=old.mcp_servers.keys() - new.mcp_servers.keys()).delete()
    for name, spec in new.mcp_servers.items():
        if old.mcp_servers.get(name) != spec:
            McpServer.objects.update_or_create(name=name, defaults=_mcp_server_fields(spec))
    McpBundle.objects.filter(alias__in=old.mcp_bundles.keys() - new.mcp_bundles.keys()).delete()
    for alias, bspec in new.mcp_bundles.items():
        if old.mcp_bundles.get(alias) != bspec:
            McpBundle.objects.update_or_create(alias=alias, defaults=_spec_fields(bspec, skip=("alias",)))
    if old.mcp != new.mcp:
        McpSettings.objects.update_or_create(pk=1, defaults=_spec_fields(new.mcp))


def _write_snapshot(old: ConfigSnapshot, new: ConfigSnapshot) -> None:
    """Bring the tables in line with `new`, touching only what changed."""
    for ref in old.providers.keys() - new.providers.keys():
        ModelProvider.objects.filter(type=old.providers[ref].type, alias=old.providers[ref].alias).delete()
    for ref, pspec in new.providers.items():
        if old.providers.get(ref) != pspec:
            ModelProvider.objects.update_or_create(
                type=pspec.type, alias=pspec.alias, defaults=_provider_fields(pspec)
            )
    RiskProfile.objects.filter(alias__in=old.risk_profiles.keys() - new.risk_profiles.keys()).delete()
    for alias, rspec in new.risk_profiles.items():
        if old.risk_profiles.get(alias) != rspec:
            RiskProfile.objects.update_or_create(alias=alias, defaults=_spec_fields(rspec, skip=("alias",)))
    RuntimeProfile.objects.filter(
        alias__in=old.runtime_profiles.keys() - new.runtime_profiles.keys()
    ).delete()
    for alias, tspec in new.runtime_profiles.items():
        if old.runtime_profiles.get(alias) != tspec:
            RuntimeProfile.objects.update_or_create(
                alias=alias, defaults=_spec_fields(tspec, skip=("alias",))
            )
    Agent.objects.filter(alias__in=old.agents.keys() - new.agents.keys()).delete()
    for alias, aspec in new.agents.items():
        if old.agents.get(alias) != aspec:
            Agent.objects.update_or_create(alias=alias, defaults=_agent_fields(aspec))
    if old.delegate != new.delegate:
        DelegateSettings.objects.update_or_create(pk=1, defaults=_spec_fields(new.delegate))
    _write_mcp(old, new)


# Any constant: the key of the PostgreSQL advisory lock that serialises configuration writers.
_CONFIG_LOCK_KEY = 0x636C6177


def _lock_configuration() -> None:
    """Serialise read-modify-write of the configuration until the transaction ends.

    SQLite transactions here begin IMMEDIATE (the write lock is taken first), which already does
    this; PostgreSQL needs an explicit lock, or two concurrent edits would each replace the
    configuration with a snapshot that lacks the other's change."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_CONFIG_LOCK_KEY])


@dataclass(frozen=True)
class PreparedChange:
    """Everything a save writes, worked out before the write transaction opens."""

    old: ConfigSnapshot
    snapshot: ConfigSnapshot
    toml: str
    diff: str
    changes: list[str]


def document_size_errors(toml: str) -> list[tuple[str, str]]:
    """What can be saved must import again: the export is held to the import's size cap."""
    size = len(toml.encode("utf-8"))
    if size > MAX_DOCUMENT_BYTES:
        return [
            (
                "",
                f"the configuration would be {size} bytes as TOML, more than the 1 MiB "
                f"({MAX_DOCUMENT_BYTES} bytes) an import accepts",
            )
        ]
    return []


def config_prepare(*, old: ConfigSnapshot, new: ConfigSnapshot) -> PreparedChange:
    """Resolve the api_keys of `new`, validate it whole, and compute its TOML, diff and summary
    (linear time). Raises ConfigValidationError with every error."""
    new, errors = resolve_secrets(new, old)
    errors += validate_snapshot(new)
    if errors:
        raise ConfigValidationError(errors)
    toml = export_toml(new)
    size_errors = document_size_errors(toml)
    if size_errors:
        raise ConfigValidationError(size_errors)
    before = export_toml(old)
    return PreparedChange(
        old=old,
        snapshot=new,
        toml=toml,
        diff=diff_texts(before, toml),
        changes=summarize_diff(old, new),
    )


def _commit(prepared: PreparedChange, user: Any, summary: str) -> ConfigRevision | None:
    """Inside the write transaction: only writes (the rows that changed and one revision)."""
    if prepared.old == prepared.snapshot:
        return None
    _write_snapshot(prepared.old, prepared.snapshot)
    return ConfigRevision.objects.create(
        created_by=user if getattr(user, "is_authenticated", False) else None,
        summary=(summary or ", ".join(prepared.changes))[:300],
        toml=prepared.toml,
        diff=prepared.diff,
    )


# Optimistic attempts before a change is worked out under the lock (heavy contention only).
_OPTIMISTIC_ATTEMPTS = 3


def config_update(
    *, mutate: Callable[[ConfigSnapshot], ConfigSnapshot], user: Any = None, summary: str = ""
) -> tuple[ConfigSnapshot, ConfigRevision | None]:
    prepared, revision = config_update_prepared(mutate=mutate, user=user, summary=summary)
    return prepared.snapshot, revision


def config_update_prepared(
    *, mutate: Callable[[ConfigSnapshot], ConfigSnapshot], user: Any = None, summary: str = ""
) -> tuple[PreparedChange, ConfigRevision | None]:
    """Apply one change to the current configuration, validated as a whole, atomically.

    The change, its validation, TOML and diff are worked out before the write transaction
    opens, on the configuration as read then; inside the transaction (the database's write
    lock) the configuration is read again and, when it is still the same, only the writes
    happen. When a concurrent change got in between, the whole is worked out again on the new
    configuration, so a concurrent change is never lost. An exception `mutate` raises leaves
    everything as it was."""
    for _ in range(_OPTIMISTIC_ATTEMPTS):
        old = config_snapshot_read()
        prepared = config_prepare(old=old, new=mutate(old))
        with transaction.atomic():
            _lock_configuration()
            if config_snapshot_read() == old:
                return prepared, _commit(prepared, user, summary)
    with transaction.atomic():
        _lock_configuration()
        old = config_snapshot_read()
        prepared = config_prepare(old=old, new=mutate(old))
        return prepared, _commit(prepared, user, summary)


def config_replace(*, snapshot: ConfigSnapshot, user: Any = None, summary: str = "") -> ConfigRevision | None:
    """Replace the whole configuration with `snapshot`. Returns the revision, or None if nothing changed."""
    return config_update(mutate=lambda _old: snapshot, user=user, summary=summary)[1]


def config_revision_restore(*, revision: ConfigRevision, user: Any = None) -> ConfigRevision | None:
    """Import that revision's TOML as a new change (the whole configuration becomes it). A
    revision that no longer reads or validates is refused with its reasons, never a 500."""
    from agents_app.config_io import ConfigParseError, ConfigShapeError, parse_toml

    try:
        snapshot = parse_toml(revision.toml).snapshot
    except ConfigParseError as exc:
        raise ConfigValidationError([("", f"revision {revision.pk} cannot be read: {exc}")]) from exc
    except ConfigShapeError as exc:
        raise ConfigValidationError(list(exc.errors)) from exc
    return config_replace(snapshot=snapshot, user=user, summary=f"restore revision {revision.pk}")
