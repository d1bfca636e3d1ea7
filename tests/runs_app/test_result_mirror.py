"""The JSON mirror of a background task (SPEC §6.2): writers of one results folder take turns and
read the task only once it is their turn, so a late "running" copy never lands over a final one."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest
from django.db import connection
from django.utils import timezone

from runs_app.engine.settle import mirror_result_file, results_folder_lock
from runs_app.models import Run

pytestmark = pytest.mark.django_db(transaction=True)


def _task(results_dir: Path) -> Run:
    return Run.objects.create(
        agent="reviewer",
        kind=Run.Kind.DELEGATE,
        execution=Run.Execution.BACKGROUND,
        status=Run.Status.RUNNING,
        results_dir=str(results_dir),
    )


def _mirror_in_thread(run_id: object) -> threading.Thread:
    def target() -> None:
        try:
            mirror_result_file(run_id)
        finally:
            connection.close()

    thread = threading.Thread(target=target)
    thread.start()
    return thread


def test_a_writer_that_started_while_the_task_ran_writes_what_the_task_is_when_its_turn_comes(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "delegate_results"
    task = _task(folder)
    path = folder / f"{task.pk}.json"
    folder.mkdir()
    with results_folder_lock(folder):
        early = _mirror_in_thread(task.pk)  # the start writer: the task is running now
        early.join(0.3)
        assert early.is_alive(), "the writer must wait for its turn"
        assert not path.exists()
        # the task ends meanwhile, and its own writer queues up behind the first one
        Run.objects.filter(pk=task.pk).update(
            status=Run.Status.COMPLETED,
            finished_at=timezone.now(),
            tool_result={"output": "looks fine", "error": None},
        )
        final = _mirror_in_thread(task.pk)
    early.join(10)
    final.join(10)
    data = json.loads(path.read_text())
    assert (data["status"], data["output"], data["error"]) == ("completed", "looks fine", None)
    assert sorted(os.listdir(folder)) == [f"{task.pk}.json"]
