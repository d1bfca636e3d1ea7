"""Answers worked out once per database transaction (and locks taken once: `events.lock_tree`).

Some reads repeat for each tool call of one transaction: a model turn of twenty spawns asks
twenty times whether its agent exists, which tracker row its budget is on, and what the day's
cost is. Inside one transaction the first answer serves the rest, as of that first ask.
Outside a transaction nothing is kept."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from zeroclaw_site import dbconn

T = TypeVar("T")

_ATTR = "_clawboard_tx_memo"


def _memo(create: bool) -> dict[Any, Any] | None:
    conn = dbconn.default()
    if not conn.atomic_blocks:
        return None
    outermost = conn.atomic_blocks[0]
    memo: tuple[Any, dict[Any, Any]] | None = getattr(conn, _ATTR, None)
    if memo is None or memo[0] is not outermost:
        if not create:
            return None
        # Keyed by the outermost atomic block, held here so that no later one is mistaken for it.
        memo = (outermost, {})
        setattr(conn, _ATTR, memo)
    return memo[1]


def once_per_transaction(key: Any, compute: Callable[[], T]) -> T:
    """`compute()`, worked out once per transaction for a given `key` (outside a transaction,
    every time)."""
    memo = _memo(create=True)
    if memo is None:
        return compute()
    if key not in memo:
        memo[key] = compute()
    return memo[key]  # type: ignore[no-any-return]


def forget(key: Any) -> None:
    """The transaction changed what `key` answered: the next ask works it out again."""
    memo = _memo(create=False)
    if memo is not None:
        memo.pop(key, None)
