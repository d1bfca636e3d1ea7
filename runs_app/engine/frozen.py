"""A run's frozen authorization: the policy and provider chain decided at admission,
stored on the run as JSON so a later configuration change never alters a run in flight."""

from __future__ import annotations

import dataclasses
import hashlib
import json
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
        """A new top-level dict each time (callers add keys to it); the parts below it are
        shared between calls and must not be changed. Worked out once per instance: every
        child a run spawns stores its parent's policy, and the scripts of the chain need a
        query each (`_spec_json`). A policy read from JSON has that JSON's parts already."""
        parts: dict[str, Any] | None = self.__dict__.get("_json")
        if parts is None:
            parts = {
                "risk": to_json(self.risk),
                "runtime": to_json(self.runtime),
                "provider": self.provider.ref,
                "chain": {ref: _spec_json(spec) for ref, spec in self.chain.items()},
            }
            object.__setattr__(self, "_json", parts)
        return dict(parts)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FrozenPolicy:
        """The policy stored as `data`. A child queued in this process carries its parent's
        policy parts as the very same objects (`to_json` shares them), so the policy parsed
        for the first child serves its siblings: looked up by the parts' identity."""
        risk, runtime, chain_json, ref = data["risk"], data["runtime"], data["chain"], data["provider"]
        key = (id(risk), id(runtime), id(chain_json), ref)
        hit = _parsed.get(key)
        if hit is not None and hit[0] is risk and hit[1] is runtime and hit[2] is chain_json:
            return hit[3]
        chain = {name: _spec_from_json(spec) for name, spec in chain_json.items()}
        policy = cls(
            risk=from_json(RiskProfileSpec, risk),
            runtime=from_json(RuntimeProfileSpec, runtime),
            provider=chain[ref],
            chain=chain,
        )
        object.__setattr__(
            policy, "_json", {"risk": risk, "runtime": runtime, "provider": ref, "chain": chain_json}
        )
        if len(_parsed) >= 256:
            _parsed.clear()
        # The parts are held by the entry, so their ids cannot be reused while it is there.
        _parsed[key] = (risk, runtime, chain_json, policy)
        return policy


_parsed: dict[tuple[int, int, int, str], tuple[Any, Any, Any, FrozenPolicy]] = {}


def provider_chain(snapshot: ConfigSnapshot, provider: ProviderSpec) -> dict[str, ProviderSpec]:
    return {spec.ref: spec for spec in resolve_chain(provider, snapshot.providers)}


# -- scripts by reference ------------------------------------------------------------------------
# A scripted provider's script can be long (a benchmark's is thousands of turns). Stored in every
# run's policy it would make each child cost more as the script grows, so a policy holds the
# script's digest and the script itself lives once in ScriptBlob (cached per process).

_scripts: dict[str, Any] = {}  # digest -> script
_digests: dict[int, tuple[Any, str]] = {}  # id(script) -> (script, digest); the script kept alive


def script_digest(script: Any) -> str:
    known = _digests.get(id(script))
    if known is not None and known[0] is script:
        return known[1]
    digest = hashlib.sha256(json.dumps(script, sort_keys=True, default=str).encode()).hexdigest()
    if len(_digests) > 10_000:
        _digests.clear()
    _digests[id(script)] = (script, digest)
    _scripts.setdefault(digest, script)
    return digest


def _spec_json(spec: ProviderSpec) -> dict[str, Any]:
    data = to_json(spec)
    script = data.pop("script", None)
    if script:
        from runs_app.engine import sql
        from runs_app.models import ScriptBlob

        digest = script_digest(script)
        # Every child's policy comes through here: a plain SELECT that never reads the script back.
        if not sql.fetchone(f"SELECT 1 FROM {sql.table(ScriptBlob)} WHERE digest = %s", [digest]):
            ScriptBlob.objects.get_or_create(digest=digest, defaults={"script": script})
        data["script_digest"] = digest
    return data


def _spec_from_json(data: dict[str, Any]) -> ProviderSpec:
    digest = data.get("script_digest")
    if not digest:
        return from_json(ProviderSpec, data)
    script = _scripts.get(digest)
    if script is None:
        from runs_app.models import ScriptBlob

        script = ScriptBlob.objects.get(pk=digest).script
        _scripts[digest] = script
        _digests[id(script)] = (script, digest)
    return dataclasses.replace(from_json(ProviderSpec, data), script=script)


_providers: dict[tuple[Any, ...], Any] = {}


def cached_provider(spec: ProviderSpec, chain: dict[str, ProviderSpec]) -> Any:
    """`build_provider`, once per process for a given chain: building a scripted provider parses
    its whole script. Providers are stateless between calls, so one instance serves every run."""
    from runs_app.engine.providers import build_provider

    key = (spec.ref, *(_spec_key(s) for s in [spec, *chain.values()]))
    provider = _providers.get(key)
    if provider is None:
        provider = build_provider(spec, chain)
        if len(_providers) > 256:
            _providers.clear()
        _providers[key] = provider
    return provider


def _spec_key(spec: ProviderSpec) -> str:
    """What identifies a provider spec in `cached_provider`, worked out once per spec object
    (each step and each spawn asks, and the specs of one parsed policy are shared)."""
    known = _spec_keys.get(id(spec))
    if known is not None and known[0] is spec:
        return known[1]
    data = to_json(spec)
    script = data.pop("script", None)
    key = json.dumps(data, sort_keys=True, default=str) + (script_digest(script) if script else "")
    if len(_spec_keys) > 10_000:
        _spec_keys.clear()
    _spec_keys[id(spec)] = (spec, key)  # the spec kept alive, so its id is not reused meanwhile
    return key


_spec_keys: dict[int, tuple[ProviderSpec, str]] = {}
