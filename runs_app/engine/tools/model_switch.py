"""`model_switch` (top-level runs only): the run's next model turns go to another configured
provider. The run gets a new frozen snapshot, its policy with that provider and its chain."""

from __future__ import annotations

from typing import Any

from agents_app.models import ModelProvider
from agents_app.selectors import config_snapshot_get
from runs_app.engine.frozen import policy_of, provider_chain, snapshot_for
from runs_app.engine.tools.base import LocalToolContext, ToolResult
from runs_app.models import Run


def model_switch(ctx: LocalToolContext, args: dict[str, Any]) -> ToolResult:
    ref = args.get("model_provider")
    if not isinstance(ref, str) or "." not in ref:
        return ToolResult.fail("'model_provider' must be dotted form <type>.<alias>")
    ptype, _, alias = ref.partition(".")
    row = ModelProvider.objects.filter(type=ptype, alias=alias).first()
    if row is None:
        return ToolResult.fail(f"Unknown model provider '{ref}'")
    spec = row.to_spec()
    run = Run.objects.get(pk=ctx.run_id)
    policy = policy_of(run).with_provider(spec, provider_chain(config_snapshot_get(), spec))
    Run.objects.filter(pk=run.pk).update(snapshot_id=snapshot_for(policy), provider_ref=ref)
    return ToolResult.ok(f"Switched to model provider '{ref}' ({row.model or row.type}).")
