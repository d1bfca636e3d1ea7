"""Write-side of the configuration. Every change goes through `config_replace`:
validate the whole resulting snapshot (SPEC §2.5, all errors at once), then write it in one
transaction together with a revision (who, when, TOML, diff). Nothing is half-written."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from django.db import connection, transaction

from agents_app.config_io import diff_snapshots, export_toml, summarize_diff
from agents_app.models import Agent, ConfigRevision, ModelProvider
from agents_app.selectors import config_snapshot_get
from agents_app.snapshot import AgentSpec, ConfigSnapshot, ProviderSpec
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


def config_replace(*, snapshot: ConfigSnapshot, user: Any = None, summary: str = "") -> ConfigRevision | None:
    """Replace the whole configuration with `snapshot`. Returns the revision, or None if nothing changed."""
    errors = validate_snapshot(snapshot)
    if errors:
        raise ConfigValidationError(errors)
    with transaction.atomic():
        _lock_configuration()
        old = config_snapshot_get()
        if old == snapshot:
            return None
        _write_snapshot(old, snapshot)
        lines = summarize_diff(old, snapshot)
        return ConfigRevision.objects.create(
            created_by=user if getattr(user, "is_authenticated", False) else None,
            summary=(summary or ", ".join(lines))[:300],
            toml=export_toml(snapshot),
            diff=diff_snapshots(old, snapshot),
        )


def config_update(
    *, mutate: Callable[[ConfigSnapshot], ConfigSnapshot], user: Any = None, summary: str = ""
) -> tuple[ConfigSnapshot, ConfigRevision | None]:
    """Apply one change to the current configuration, validated as a whole, atomically.

    `mutate` runs inside the transaction on the snapshot read there, so a concurrent change is
    never lost; an exception it raises leaves everything as it was."""
    with transaction.atomic():
        _lock_configuration()
        new = mutate(config_snapshot_get())
        return new, config_replace(snapshot=new, user=user, summary=summary)


def config_revision_restore(*, revision: ConfigRevision, user: Any = None) -> ConfigRevision | None:
    from agents_app.config_io import parse_toml

    snapshot = parse_toml(revision.toml).snapshot
    return config_replace(snapshot=snapshot, user=user, summary=f"restore revision {revision.pk}")
