"""A run's frozen authorization: the policy and provider chain decided at admission,
stored on the run as JSON so a later configuration change never alters a run in flight."""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass
from typing import Any, TypeVar

from agents_app.snapshot import ConfigSnapshot, ProviderSpec
from policies_app.specs import RiskProfileSpec, RuntimeProfileSpec
from runs_app.engine.providers import resolve_chain

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


_TUPLE_FIELDS: dict[type, frozenset[str]] = {}


def from_json(cls: type[T], data: dict[str, Any]) -> T:
    names = _TUPLE_FIELDS.get(cls)
    if names is None:
        hints = typing.get_type_hints(cls)
        names = frozenset(n for n, tp in hints.items() if _is_tuple_type(tp))
        _TUPLE_FIELDS[cls] = names
    known = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    values = {
        k: (tuple(v) if k in names and isinstance(v, list) else v) for k, v in data.items() if k in known
    }
    return cls(**values)


@dataclass(frozen=True)
class FrozenPolicy:
    risk: RiskProfileSpec
    runtime: RuntimeProfileSpec
    provider: ProviderSpec
    chain: dict[str, ProviderSpec]

    def to_json(self) -> dict[str, Any]:
        return {
            "risk": to_json(self.risk),
            "runtime": to_json(self.runtime),
            "provider": self.provider.ref,
            "chain": {ref: to_json(spec) for ref, spec in self.chain.items()},
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FrozenPolicy:
        chain = {ref: from_json(ProviderSpec, spec) for ref, spec in data["chain"].items()}
        return cls(
            risk=from_json(RiskProfileSpec, data["risk"]),
            runtime=from_json(RuntimeProfileSpec, data["runtime"]),
            provider=chain[data["provider"]],
            chain=chain,
        )


def provider_chain(snapshot: ConfigSnapshot, provider: ProviderSpec) -> dict[str, ProviderSpec]:
    return {spec.ref: spec for spec in resolve_chain(provider, snapshot.providers)}
