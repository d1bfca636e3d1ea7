"""Read-side of the configuration: the database as one immutable snapshot."""

from __future__ import annotations

from agents_app.models import Agent, ConfigRevision, ModelProvider
from agents_app.snapshot import ConfigSnapshot
from policies_app.models import DelegateSettings, RiskProfile, RuntimeProfile
from policies_app.specs import DelegateGlobals


def config_snapshot_get() -> ConfigSnapshot:
    settings_row = DelegateSettings.objects.filter(pk=1).first()
    return ConfigSnapshot(
        providers={p.ref: p.to_spec() for p in ModelProvider.objects.order_by("type", "alias")},
        risk_profiles={r.alias: r.to_spec() for r in RiskProfile.objects.order_by("alias")},
        runtime_profiles={r.alias: r.to_spec() for r in RuntimeProfile.objects.order_by("alias")},
        agents={a.alias: a.to_spec() for a in Agent.objects.order_by("alias")},
        delegate=settings_row.to_spec() if settings_row else DelegateGlobals(),
    )


def config_revision_list(*, limit: int = 100) -> list[ConfigRevision]:
    return list(ConfigRevision.objects.select_related("created_by").order_by("-id")[:limit])
