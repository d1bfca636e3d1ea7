"""A run's frozen policy as JSON (runs_app/engine/frozen.py): worked out once per policy, and
parsed once for the children of one parent."""

from __future__ import annotations

import pytest

from runs_app.engine.frozen import FrozenPolicy
from runs_app.models import Run
from runs_app.services import run_start
from tests.runs_app.engine_support import (
    agent,
    configure,
    engine,  # noqa: F401 - fixture
    provider,
    wait_for,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("engine")]


def stored_policy() -> dict:
    configure(provider("boss", [{"turns": [{"say": "hi"}]}]) + agent("boss", "scripted.boss"))
    run = run_start(agent="boss", prompt="go")
    wait_for(run.pk)
    return Run.objects.get(pk=run.pk).policy


def test_to_json_gives_a_new_top_level_dict_each_time_with_the_same_content() -> None:
    policy = FrozenPolicy.from_json(stored_policy())
    first, second = policy.to_json(), policy.to_json()
    assert first == second and first is not second
    first["budget_holders"] = ["x"]  # what create_run adds to a child's copy
    assert "budget_holders" not in policy.to_json()
    assert FrozenPolicy.from_json(first) == policy


def test_a_childs_policy_made_from_its_parents_is_parsed_once_for_all_siblings() -> None:
    parent = FrozenPolicy.from_json(stored_policy())
    child_a = {**parent.to_json(), "result_chars": 6000}
    child_b = {**parent.to_json(), "result_chars": 6000}
    assert FrozenPolicy.from_json(child_a) is FrozenPolicy.from_json(child_b)
    # Equal content in other objects (a row read from the database) is parsed anew, equal.
    loaded = {k: (dict(v) if isinstance(v, dict) else v) for k, v in child_a.items()}
    again = FrozenPolicy.from_json(loaded)
    assert again == FrozenPolicy.from_json(child_a) and again is not FrozenPolicy.from_json(child_a)


def test_a_provider_specs_cache_key_is_worked_out_once_and_equal_for_equal_specs() -> None:
    import dataclasses

    from runs_app.engine import frozen

    spec = FrozenPolicy.from_json(stored_policy()).provider
    key = frozen._spec_key(spec)
    assert frozen._spec_keys[id(spec)] == (spec, key)
    twin = dataclasses.replace(spec)  # equal, another object
    assert twin is not spec and frozen._spec_key(twin) == key
    other = dataclasses.replace(spec, model="another-model")
    assert frozen._spec_key(other) != key
