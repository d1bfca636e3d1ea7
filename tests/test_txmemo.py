"""Answers worked out once per transaction (zeroclaw_site/txmemo.py)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.db import transaction

from zeroclaw_site.txmemo import forget, once_per_transaction

pytestmark = pytest.mark.django_db(transaction=True)


def counter() -> tuple[list[int], Callable[[], int]]:
    calls: list[int] = []

    def compute() -> int:
        calls.append(1)
        return len(calls)

    return calls, compute


def test_inside_a_transaction_a_key_is_worked_out_once_until_forgotten() -> None:
    calls, compute = counter()
    with transaction.atomic():
        assert [once_per_transaction("k", compute) for _ in range(3)] == [1, 1, 1]
        assert once_per_transaction("other", compute) == 2  # another key: its own answer
        with transaction.atomic():  # a savepoint is the same transaction
            assert once_per_transaction("k", compute) == 1
        forget("k")
        assert once_per_transaction("k", compute) == 3
    assert len(calls) == 3


def test_outside_a_transaction_nothing_is_kept_and_each_transaction_starts_afresh() -> None:
    calls, compute = counter()
    assert [once_per_transaction("k", compute) for _ in range(2)] == [1, 2]
    forget("k")  # nothing to forget: no error
    with transaction.atomic():
        assert once_per_transaction("k", compute) == 3
    with transaction.atomic():
        assert once_per_transaction("k", compute) == 4
