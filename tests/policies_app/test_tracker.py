from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection

from policies_app.models import Tracker, TrackerAction
from policies_app.tracker import (
    BudgetExhausted,
    tracker_check_cost,
    tracker_record_action,
    tracker_record_cost,
    tracker_usage,
)

pytestmark = pytest.mark.django_db

NOON = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)


def test_actions_are_recorded_until_the_budget_is_full() -> None:
    for _ in range(3):
        tracker_record_action(key="a", max_actions_per_hour=3, now=NOON)
    with pytest.raises(BudgetExhausted) as excinfo:
        tracker_record_action(key="a", max_actions_per_hour=3, now=NOON)
    assert excinfo.value.message == "Rate limit exceeded: action budget exhausted"
    assert str(excinfo.value) == "Rate limit exceeded: action budget exhausted"
    assert tracker_usage(key="a", now=NOON)["actions_last_hour"] == 3


def test_a_refused_action_records_nothing() -> None:
    tracker_record_action(key="a", max_actions_per_hour=1, now=NOON)
    with pytest.raises(BudgetExhausted):
        tracker_record_action(key="a", max_actions_per_hour=1, now=NOON)
    assert TrackerAction.objects.filter(tracker__key="a").count() == 1


def test_zero_actions_per_hour_blocks_every_action() -> None:
    with pytest.raises(BudgetExhausted, match="^Rate limit exceeded: action budget exhausted$"):
        tracker_record_action(key="a", max_actions_per_hour=0, now=NOON)
    assert tracker_usage(key="a", now=NOON)["actions_last_hour"] == 0


def test_the_action_window_slides_after_an_hour() -> None:
    tracker_record_action(key="a", max_actions_per_hour=1, now=NOON)
    with pytest.raises(BudgetExhausted):
        tracker_record_action(key="a", max_actions_per_hour=1, now=NOON + timedelta(minutes=59))
    tracker_record_action(key="a", max_actions_per_hour=1, now=NOON + timedelta(hours=1))
    assert tracker_usage(key="a", now=NOON + timedelta(hours=1))["actions_last_hour"] == 1


def test_trackers_with_different_keys_do_not_share_a_budget() -> None:
    tracker_record_action(key="a", max_actions_per_hour=1, now=NOON)
    tracker_record_action(key="b", max_actions_per_hour=1, now=NOON)
    assert Tracker.objects.count() == 2


def test_cost_is_summed_per_day() -> None:
    tracker_record_cost(key="a", cents=1.5, now=NOON)
    tracker_record_cost(key="a", cents=2.5, now=NOON)
    tracker_record_cost(key="a", cents=100, now=NOON - timedelta(days=1))
    assert tracker_usage(key="a", now=NOON) == {"actions_last_hour": 0, "cost_today_cents": 4.0}


def test_cost_check_refuses_once_the_daily_budget_is_reached() -> None:
    tracker_check_cost(key="a", max_cost_per_day_cents=10, now=NOON)
    tracker_record_cost(key="a", cents=9.99, now=NOON)
    tracker_check_cost(key="a", max_cost_per_day_cents=10, now=NOON)
    tracker_record_cost(key="a", cents=0.01, now=NOON)
    with pytest.raises(BudgetExhausted) as excinfo:
        tracker_check_cost(key="a", max_cost_per_day_cents=10, now=NOON)
    assert excinfo.value.message == "Rate limit exceeded: daily cost budget exhausted"


def test_the_cost_budget_resets_the_next_day() -> None:
    tracker_record_cost(key="a", cents=10, now=NOON)
    tracker_check_cost(key="a", max_cost_per_day_cents=10, now=NOON + timedelta(days=1))


def test_negative_cost_is_refused() -> None:
    with pytest.raises(ValueError):
        tracker_record_cost(key="a", cents=-1)


def test_usage_of_an_unknown_tracker_is_zero_and_creates_nothing() -> None:
    assert tracker_usage(key="nobody") == {"actions_last_hour": 0, "cost_today_cents": 0.0}
    assert not Tracker.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_fifty_concurrent_actions_against_a_budget_of_twenty_admit_exactly_twenty() -> None:
    admitted: list[int] = []
    refused: list[str] = []
    errors: list[BaseException] = []
    lock = threading.Lock()
    start = threading.Barrier(50)

    def act(i: int) -> None:
        try:
            start.wait()
            tracker_record_action(key="shared", max_actions_per_hour=20)
            with lock:
                admitted.append(i)
        except BudgetExhausted as exc:
            with lock:
                refused.append(exc.message)
        except BaseException as exc:  # surfaced below: a lock error must fail the test
            with lock:
                errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=act, args=(i,)) for i in range(50)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    assert errors == []
    assert len(admitted) == 20
    assert refused == ["Rate limit exceeded: action budget exhausted"] * 30
    assert TrackerAction.objects.filter(tracker__key="shared").count() == 20
