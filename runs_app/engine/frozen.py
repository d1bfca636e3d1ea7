"""A run's frozen authorization: the policy and provider chain decided at admission. It is
stored once per distinct content as a `PolicySnapshot` row that runs point to, so a later
configuration change never alters a run in flight, and a subagent (which runs under its
parent's policy) shares its parent's row."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import types
import typing
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import Any, TypeVar

from django.db import transaction

from agents_app.snapshot import ConfigSnapshot, McpServerSpec, ProviderSpec, SecretValue
from policies_app.policy import McpCeiling
from policies_app.specs import RiskProfileSpec, RuntimeProfileSpec
from runs_app.engine.providers import ModelProvider, build_provider, resolve_chain
from runs_app.models import PolicySnapshot, Run

T = TypeVar("T")


def to_json(spec: Any) -> dict[str, Any]:
    return {
        f.name: list(v) if isinstance(v := getattr(spec, f.name), tuple) else v
        for f in dataclasses.fields(spec)
    }


def _is_tuple_type(tp: Any) -> bool:
    origin = typing.get_origin(tp)
    if origin is tuple:
        return True
    if origin in (typing.Union, types.UnionType):
        return any(_is_tuple_type(a) for a in typing.get_args(tp))
    return False


@cache
def _tuple_fields(cls: type) -> frozenset[str]:
    return frozenset(n for n, tp in typing.get_type_hints(cls).items() if _is_tuple_type(tp))


def from_json(cls: type[T], data: dict[str, Any]) -> T:
    names = _tuple_fields(cls)  # type: ignore[arg-type]
    known = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    values = {
        k: (tuple(v) if k in names and isinstance(v, list) else v) for k, v in data.items() if k in known
    }
    return cls(**values)


def mcp_server_to_json(spec: McpServerSpec) -> dict[str, Any]:
    data = to_json(spec)
    for name in ("env", "headers"):
        data[name] = {k: {"token": v.token, "env": v.env} for k, v in getattr(spec, name).items()}
    return data


def mcp_server_from_json(data: dict[str, Any]) -> McpServerSpec:
    values = dict(data)
    for name in ("env", "headers"):
        values[name] = {k: SecretValue(**v) for k, v in (data.get(name) or {}).items()}
    return from_json(McpServerSpec, values)


@dataclass(frozen=True)
class FrozenPolicy:
    risk: RiskProfileSpec
    runtime: RuntimeProfileSpec
    provider: ProviderSpec
    chain: dict[str, ProviderSpec]
    # The MCP servers the run may use, as configured when it was admitted (secrets as their
    # encrypted tokens or variable names), whether their tools are deferred (`tool_search`),
    # and the narrowing each bounded delegation on the way added (policy.mcp_tool_verdict).
    mcp: tuple[McpServerSpec, ...] = ()
    mcp_deferred: bool = False
    mcp_ceilings: tuple[McpCeiling, ...] = ()
    # The agents a run of this policy may delegate to, as configured when it was admitted:
    # named to the model in the `delegate` schema (docs/delegation.md#delegate). The call
    # itself is checked against the configuration in force when it is made.
    roster: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        data = {
            "risk": to_json(self.risk),
            "runtime": to_json(self.runtime),
            "provider": self.provider.ref,
            "chain": {ref: to_json(spec) for ref, spec in self.chain.items()},
        }
        if self.mcp:  # absent otherwise, so the digest of a policy without MCP is unchanged
            data["mcp"] = {
                "servers": [mcp_server_to_json(s) for s in self.mcp],
                "deferred": self.mcp_deferred,
                "ceilings": [[list(excluded), deny_all] for excluded, deny_all in self.mcp_ceilings],
            }
        if self.roster:  # absent otherwise, as for MCP
            data["roster"] = list(self.roster)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FrozenPolicy:
        chain = {ref: from_json(ProviderSpec, spec) for ref, spec in data["chain"].items()}
        mcp = data.get("mcp") or {}
        return cls(
            risk=from_json(RiskProfileSpec, data["risk"]),
            runtime=from_json(RuntimeProfileSpec, data["runtime"]),
            provider=chain[data["provider"]],
            chain=chain,
            mcp=tuple(mcp_server_from_json(s) for s in mcp.get("servers", [])),
            mcp_deferred=bool(mcp.get("deferred", False)),
            mcp_ceilings=tuple((tuple(e), bool(d)) for e, d in mcp.get("ceilings", [])),
            roster=tuple(data.get("roster", ())),
        )

    def with_provider(self, provider: ProviderSpec, chain: dict[str, ProviderSpec]) -> FrozenPolicy:
        return dataclasses.replace(self, provider=provider, chain=chain)


def provider_chain(snapshot: ConfigSnapshot, provider: ProviderSpec) -> dict[str, ProviderSpec]:
    return {spec.ref: spec for spec in resolve_chain(provider, snapshot.providers)}


def snapshot_for(policy: FrozenPolicy) -> str:
    """The digest of `policy`'s stored snapshot, whose row is created the first time this
    content is seen. The same policy object asked again (runs_app.services hands one to every
    new run of an agent until the configuration changes) is not looked up again."""
    known = _stored.get(id(policy))
    if known is not None and known[0] is policy:
        return known[1]
    data = policy.to_json()
    digest = hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()
    PolicySnapshot.objects.get_or_create(digest=digest, defaults={"data": data})
    transaction.on_commit(lambda: _remember(policy, digest))
    return digest


# Policies whose snapshot row is stored, by object. Added once the transaction that found or
# wrote the row has committed, so a row that was rolled back is never taken as stored; an
# entry holds its policy, so its id() is not reused by another object while it is here.
_stored: dict[int, tuple[FrozenPolicy, str]] = {}
STORED_MAX = 256


def _remember(policy: FrozenPolicy, digest: str) -> None:
    if len(_stored) >= STORED_MAX:
        _stored.clear()
    _stored[id(policy)] = (policy, digest)


# A snapshot is known by the digest of its content, so a policy parsed once serves every later
# step of every run that points to the same digest.
@lru_cache(maxsize=512)
def _parsed(digest: str) -> FrozenPolicy:
    return FrozenPolicy.from_json(PolicySnapshot.objects.get(digest=digest).data)


def policy_of(run: Run) -> FrozenPolicy:
    if run.snapshot_id is None:
        raise ValueError(f"run {run.pk} has no frozen policy")
    return _parsed(run.snapshot_id)


@lru_cache(maxsize=256)
def _provider(digest: str) -> ModelProvider:
    policy = _parsed(digest)
    return build_provider(policy.provider, policy.chain)


def provider_of(run: Run) -> ModelProvider:
    """The run's model provider (its fallback chain included), built once per process and
    snapshot: building a scripted provider parses its whole script, and providers keep no
    state between calls. Raises ProviderError when it cannot be built."""
    policy_of(run)
    return _provider(run.snapshot_id)
