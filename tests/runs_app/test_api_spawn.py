"""`POST /runs/{id}/spawn/` and `/delegate/` (SPEC §5, §6, §10): every exact refusal of
spawn_subagent with its HTTP status, results, and the tool-result body on every answer."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from rest_framework.test import APIClient

from policies_app.models import TrackerAction
from runs_app.models import Message, Run
from tests.runs_app.api_support import client_for, send_raw
from tests.runs_app.helpers import configure, wait_for

PROVIDERS = """
[providers.models.scripted.boss]
model = "boss-1"
script = [
  { match = "^part:", turns = [ { say = "did {{prompt}}" } ] },
  { match = "^slow:", turns = [ { sleep_ms = 1500 }, { say = "slowly did {{prompt}}" } ] },
  { match = "^fail:", turns = [ { error = "boom" } ] },
  { turns = [ { say = "ok" } ] },
]

[providers.models.scripted.review]
model = "review-1"
script = [ { turns = [ { say = "looks fine: {{prompt}}" } ] } ]

[agents.reviewer]
model_provider = "scripted.review"
risk_profile = "team"

[agents.checker]
model_provider = "scripted.review"
risk_profile = "team"
"""


def setup_boss(*, risk: str = "team", runtime: dict[str, Any] | None = None, extra: str = "") -> None:
    text = PROVIDERS + f'[agents.boss]\nmodel_provider = "scripted.boss"\nrisk_profile = "{risk}"\n'
    if runtime is not None:
        text += 'runtime_profile = "rt"\n[runtime_profiles.rt]\n'
        text += "".join(f"{k} = {json.dumps(v)}\n" for k, v in runtime.items())
    configure(text + extra)


@pytest.fixture
def operator() -> APIClient:
    return client_for("olivia", "operator")


def start_boss(client: APIClient) -> str:
    response = client.post("/api/v1/runs/", {"agent": "boss", "prompt": "plan"}, format="json")
    assert response.status_code == 201, response.content
    return str(response.json()["id"])


def spawn(client: APIClient, run_id: str, **body: Any) -> Any:
    return client.post(f"/api/v1/runs/{run_id}/spawn/", body, format="json")


def delegate(client: APIClient, run_id: str, **body: Any) -> Any:
    return client.post(f"/api/v1/runs/{run_id}/delegate/", body, format="json")


def refused(response: Any, status: int, error: str) -> None:
    assert response.status_code == status, response.content
    assert response.json() == {"success": False, "output": "", "error": error}


# -- spawn_subagent: the checks of SPEC §5, in order ------------------------------------------


@pytest.mark.django_db
def test_spawn_without_a_prompt_is_400(operator: APIClient) -> None:
    setup_boss()
    run = start_boss(operator)
    refused(spawn(operator, run, prompt="   "), 400, "Missing or empty 'prompt' parameter")
    refused(spawn(operator, run), 400, "Missing or empty 'prompt' parameter")
    refused(spawn(operator, run, prompt=["x"]), 400, "Missing or empty 'prompt' parameter")


@pytest.mark.django_db
def test_a_subagent_may_not_spawn_its_own_subagents_under_the_depth_1_cap(operator: APIClient) -> None:
    setup_boss()
    run = start_boss(operator)
    child = spawn(operator, run, prompt="part: a", wait=0).json()["run_id"]
    refused(
        spawn(operator, child, prompt="part: b"),
        403,
        "spawn_subagent: a subagent may not spawn its own subagents (depth-1 cap)",
    )


@pytest.mark.django_db
def test_spawn_past_max_spawn_depth_names_the_depth(operator: APIClient) -> None:
    setup_boss(runtime={"max_spawn_depth": 2})
    run = start_boss(operator)
    child = spawn(operator, run, prompt="part: a", wait=0).json()["run_id"]
    grandchild = spawn(operator, child, prompt="part: b", wait=0).json()["run_id"]
    assert Run.objects.get(pk=grandchild).spawn_depth == 2
    refused(
        spawn(operator, grandchild, prompt="part: c"),
        403,
        "spawn_subagent is not allowed at this depth (current depth: 2, max: 2)",
    )


@pytest.mark.django_db
@pytest.mark.parametrize("lists", ['allowed_tools = ["file_read"]', 'excluded_tools = ["spawn_subagent"]'])
def test_a_risk_profile_without_spawn_subagent_refuses_it(operator: APIClient, lists: str) -> None:
    setup_boss(risk="narrow", extra=f"[risk_profiles.narrow]\n{lists}\n")
    run = start_boss(operator)
    refused(
        spawn(operator, run, prompt="part: a"),
        403,
        "spawn_subagent: refused — agent 'boss' risk_profile does not list spawn_subagent in allowed_tools",
    )


@pytest.mark.django_db
def test_spawn_beyond_max_children_per_run_is_refused(operator: APIClient) -> None:
    setup_boss(runtime={"max_children_per_run": 1})
    run = start_boss(operator)
    assert spawn(operator, run, prompt="part: a", background=True).status_code == 202
    refused(
        spawn(operator, run, prompt="part: b"),
        403,
        "spawn_subagent has reached max active children for this run (1/1)",
    )


@pytest.mark.django_db
@pytest.mark.parametrize("name", ["Bad", "last", "all", "9lives"])
def test_an_invalid_task_name_is_400(operator: APIClient, name: str) -> None:
    setup_boss()
    run = start_boss(operator)
    refused(
        spawn(operator, run, prompt="part: a", task_name=name),
        400,
        f'Invalid task_name "{name}": must match [a-z][a-z0-9_-]{{0,63}} and not be "last" or "all"',
    )


@pytest.mark.django_db
def test_a_readonly_agent_may_not_spawn(operator: APIClient) -> None:
    setup_boss(risk="ro", extra='[risk_profiles.ro]\nlevel = "readonly"\n')
    run = start_boss(operator)
    refused(
        spawn(operator, run, prompt="part: a"),
        403,
        "Security policy: read-only mode, cannot perform 'spawn_subagent'",
    )


@pytest.mark.django_db
def test_an_exhausted_action_budget_is_429_and_refusals_spend_nothing(operator: APIClient) -> None:
    setup_boss(runtime={"max_actions_per_hour": 0})
    run = start_boss(operator)
    refused(spawn(operator, run, prompt="part: a"), 429, "Rate limit exceeded: action budget exhausted")
    assert not TrackerAction.objects.exists()


@pytest.mark.django_db
def test_an_admitted_spawn_records_one_action_and_a_refused_one_none(operator: APIClient) -> None:
    setup_boss()
    run = start_boss(operator)
    spawn(operator, run, prompt="   ")
    spawn(operator, run, prompt="part: a", task_name="Bad")
    assert TrackerAction.objects.count() == 0
    assert spawn(operator, run, prompt="part: a", wait=0).status_code == 202
    assert TrackerAction.objects.count() == 1


@pytest.mark.django_db
def test_spawn_for_an_agent_no_longer_configured_is_404(operator: APIClient) -> None:
    setup_boss()
    run = start_boss(operator)
    configure(PROVIDERS)
    actions = TrackerAction.objects.count()
    refused(
        spawn(operator, run, prompt="part: a"),
        404,
        'subagent spawn failed: no agent configured under alias "boss"',
    )
    assert TrackerAction.objects.count() == actions  # a refused call consumes nothing


@pytest.mark.django_db
def test_the_budget_refusal_comes_before_the_build_refusal(operator: APIClient) -> None:
    """SPEC §5: check 6 (budget) before check 7 (build the child), though the engine works
    out the build check first."""
    setup_boss(runtime={"max_actions_per_hour": 0})
    run = start_boss(operator)
    configure(PROVIDERS)  # the agent is gone too
    refused(spawn(operator, run, prompt="part: a"), 429, "Rate limit exceeded: action budget exhausted")
    assert not TrackerAction.objects.exists()


@pytest.mark.django_db
def test_spawn_on_an_unknown_run_is_404_with_a_tool_result(operator: APIClient) -> None:
    missing = uuid.uuid4()
    refused(spawn(operator, str(missing), prompt="part: a"), 404, f"No run '{missing}'")


@pytest.mark.django_db
def test_a_bad_wait_or_a_body_that_is_not_an_object_is_400_with_a_tool_result(operator: APIClient) -> None:
    setup_boss()
    run = start_boss(operator)
    for wait in (-1, 301, "soon", True):
        refused(
            spawn(operator, run, prompt="part: a", wait=wait),
            400,
            "'wait' must be a number of seconds from 0 to 300",
        )
    response = operator.post(f"/api/v1/runs/{run}/spawn/", ["part: a"], format="json")
    refused(response, 400, "The request body must be a JSON object")
    response = send_raw(operator, "POST", f"/api/v1/runs/{run}/spawn/", b"{oops", "application/json")
    assert response.status_code == 400
    assert response.json()["success"] is False and response.json()["error"].startswith("JSON parse error")


# -- spawn_subagent: admitted ------------------------------------------------------------------


@pytest.mark.django_db
def test_a_sync_child_not_finished_within_wait_is_202_with_its_run_id_and_status(operator: APIClient) -> None:
    setup_boss()
    run = start_boss(operator)
    response = spawn(operator, run, prompt="part: a", wait=0)
    assert response.status_code == 202
    body = response.json()
    assert body == {
        "success": True,
        "output": "",
        "error": None,
        "run_id": body["run_id"],
        "status": "queued",
    }
    child = Run.objects.get(pk=body["run_id"])
    assert (child.parent_id, child.kind, child.execution, child.via_api) == (
        uuid.UUID(run),
        "subagent",
        "sync",
        True,
    )
    assert child.created_by is not None and child.created_by.username == "olivia"


@pytest.mark.django_db(transaction=True)
def test_a_sync_spawn_answers_200_with_the_childs_final_text(worker: object, operator: APIClient) -> None:
    setup_boss()
    run = start_boss(operator)
    wait_for(run)
    messages_before = Message.objects.filter(run_id=run).count()
    response = spawn(operator, run, prompt="part: a", wait=30)
    assert response.status_code == 200, response.content
    body = response.json()
    assert body == {"success": True, "output": "did part: a", "error": None, "run_id": body["run_id"]}
    assert Message.objects.filter(run_id=run).count() == messages_before
    assert Run.objects.get(pk=run).status == "completed"


@pytest.mark.django_db(transaction=True)
def test_a_background_spawn_is_202_with_the_accepted_output(worker: object, operator: APIClient) -> None:
    setup_boss()
    run = start_boss(operator)
    response = spawn(operator, run, prompt="part: a", background=True, label="lbl")
    assert response.status_code == 202
    body = response.json()
    assert body["success"] is True and body["error"] is None
    child_id = body["run_id"]
    assert json.loads(body["output"]) == {
        "status": "accepted",
        "run_id": child_id,
        "session_key": f"subagent-{child_id}",
    }
    child = wait_for(child_id)
    assert (child.status, child.output, child.execution, child.label) == (
        "completed",
        "did part: a",
        "background",
        "lbl",
    )


@pytest.mark.django_db(transaction=True)
def test_a_sync_child_that_fails_is_200_with_success_false(worker: object, operator: APIClient) -> None:
    setup_boss()
    run = start_boss(operator)
    response = spawn(operator, run, prompt="fail: a", wait=60)
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["success"], body["output"]) == (False, "")
    assert body["error"].startswith("subagent run failed: ")
    assert Run.objects.get(pk=body["run_id"]).status == "failed"


@pytest.mark.django_db(transaction=True)
def test_a_sync_child_cancelled_while_it_runs_hands_back_the_users_request(
    worker: object, operator: APIClient
) -> None:
    setup_boss()
    run = start_boss(operator)
    wait_for(run)
    Run.objects.filter(pk=run).update(status="completed")
    response = spawn(operator, run, prompt="slow: a", wait=0.2)
    assert response.status_code == 202
    child = response.json()["run_id"]
    assert response.json()["status"] in ("queued", "running")
    assert operator.post(f"/api/v1/runs/{child}/cancel/").status_code == 200
    assert Run.objects.get(pk=child).tool_result == {
        "success": False,
        "output": "",
        "error": "Cancelled by user request",
    }


# -- delegate -------------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_a_sync_delegate_answers_200_with_the_agents_header(worker: object, operator: APIClient) -> None:
    setup_boss()
    run = start_boss(operator)
    response = delegate(operator, run, agent="reviewer", prompt="again", wait=30)
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["output"] == "[Agent 'reviewer' (scripted/review-1)]\nlooks fine: again"
    assert (body["success"], body["error"]) == (True, None)
    child = Run.objects.get(pk=body["run_id"])
    assert (child.kind, child.parent_id, child.depth) == ("delegate", uuid.UUID(run), 1)


@pytest.mark.django_db(transaction=True)
def test_a_parallel_delegate_answers_with_every_block_and_run_ids(
    worker: object, operator: APIClient
) -> None:
    setup_boss()
    run = start_boss(operator)
    response = delegate(operator, run, parallel=["reviewer", "checker"], prompt="both", wait=30)
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["output"] == (
        "[Parallel delegation: 2 agents]\n\n"
        "--- reviewer (success=true) ---\n[Agent 'reviewer' (scripted/review-1)]\nlooks fine: both\n\n"
        "--- checker (success=true) ---\n[Agent 'checker' (scripted/review-1)]\nlooks fine: both"
    )
    assert [Run.objects.get(pk=i).agent for i in body["run_ids"]] == ["reviewer", "checker"]


@pytest.mark.django_db(transaction=True)
def test_a_background_delegate_is_202_and_its_result_is_read_through_results(
    worker: object, operator: APIClient
) -> None:
    setup_boss()
    run = start_boss(operator)
    response = delegate(operator, run, agent="reviewer", prompt="again", background=True)
    assert response.status_code == 202
    task = response.json()["run_id"]
    assert response.json() == {
        "success": True,
        "output": f"Background task started for agent 'reviewer'.\ntask_id: {task}\n"
        f"Use action='check_result' with task_id='{task}' to retrieve the result.",
        "error": None,
        "run_id": task,
    }
    awaited = operator.post(
        "/api/v1/results/await/", {"task_ids": [task], "timeout_ms": 10000}, format="json"
    )
    assert awaited.status_code == 200
    outcome = json.loads(awaited.json()["output"])
    assert (awaited.json()["success"], outcome["status"], outcome["completed"]) == (True, "complete", 1)

    checked = operator.get(f"/api/v1/results/{task}/")
    assert checked.status_code == 200
    view = json.loads(checked.json()["output"])
    assert (view["task_id"], view["status"]) == (task, "completed")
    assert view["output"] == "[Agent 'reviewer' (scripted/review-1)]\nlooks fine: again"
    listed = json.loads(operator.get("/api/v1/results/").json()["output"])
    assert [r["task_id"] for r in listed] == [task]
    via_run = delegate(operator, run, action="check_result", task_id=task)
    assert via_run.status_code == 200 and via_run.json()["success"] is True
    assert json.loads(delegate(operator, run, action="list_results").json()["output"])[0]["task_id"] == task
    not_running = operator.post(f"/api/v1/results/{task}/cancel/")
    assert not_running.status_code == 200
    assert not_running.json()["error"] == f"Task '{task}' is not running (status: completed)"


@pytest.mark.django_db
def test_results_of_unknown_tasks_are_404_and_malformed_ids_400(operator: APIClient) -> None:
    setup_boss()
    run = start_boss(operator)
    missing = uuid.uuid4()
    refused(operator.get(f"/api/v1/results/{missing}/"), 404, f"No result found for task_id '{missing}'")
    refused(
        operator.post(f"/api/v1/results/{missing}/cancel/"), 404, f"No task found for task_id '{missing}'"
    )
    refused(
        delegate(operator, run, action="check_result", task_id=str(missing)),
        404,
        f"No result found for task_id '{missing}'",
    )
    refused(
        delegate(operator, run, action="cancel_task", task_id="x"),
        400,
        "Invalid task_id 'x': must be a valid UUID",
    )
    refused(
        delegate(operator, run, action="check_result"), 400, "Missing 'task_id' parameter for check_result"
    )
    assert operator.get("/api/v1/results/").json() == {
        "success": True,
        "output": "No background delegate results found.",
        "error": None,
    }


@pytest.mark.django_db
def test_await_sessions_validation_is_400_with_the_tools_messages(operator: APIClient) -> None:
    one = str(uuid.uuid4())
    cases = [
        ({}, "Missing 'task_ids' parameter for await_sessions"),
        ({"task_ids": []}, "'task_ids' must contain at least one task id"),
        ({"task_ids": [one, one]}, f"Duplicate task_id '{one}' in task_ids"),
        ({"task_ids": [one], "timeout_ms": "soon"}, "'timeout_ms' must be an integer"),
        ({"task_ids": [one], "timeout_ms": 120001}, "'timeout_ms' must be no more than 120000"),
    ]
    for body, error in cases:
        refused(operator.post("/api/v1/results/await/", body, format="json"), 400, error)
    missing = operator.post("/api/v1/results/await/", {"task_ids": [one], "timeout_ms": 0}, format="json")
    assert missing.status_code == 200
    assert missing.json()["error"] == "one or more background tasks are still pending or missing"


@pytest.mark.django_db
def test_only_the_creator_or_an_admin_may_cancel_a_background_task(operator: APIClient) -> None:
    setup_boss()
    run = start_boss(operator)
    task = delegate(operator, run, agent="reviewer", prompt="later", background=True).json()["run_id"]
    other = client_for("oscar", "operator")
    refused(
        other.post(f"/api/v1/results/{task}/cancel/"),
        403,
        "Only the run's creator or an admin may cancel it.",
    )
    done = operator.post(f"/api/v1/results/{task}/cancel/")
    assert done.status_code == 200
    assert done.json()["output"] == f"Task '{task}' cancelled: the running task was aborted."


@pytest.mark.django_db
def test_delegate_refusals_carry_their_exact_messages_and_statuses(operator: APIClient) -> None:
    setup_boss()
    run = start_boss(operator)
    refused(delegate(operator, run, prompt="x"), 400, "Missing 'agent' parameter")
    refused(
        delegate(operator, run, agent="reviewer", prompt=" "), 400, "'prompt' parameter must not be empty"
    )
    refused(
        delegate(operator, run, agent="nobody", prompt="x"),
        404,
        "Unknown agent 'nobody'. Available agents: checker, reviewer",
    )
    refused(
        delegate(operator, run, action="explode"),
        400,
        "Unknown action 'explode'. Use delegate/check_result/list_results/cancel_task/await_sessions.",
    )
    refused(
        delegate(operator, run, parallel=[" "], prompt="x"),
        400,
        "'parallel' array must contain at least one agent name",
    )


@pytest.mark.django_db
def test_a_delegate_over_budget_is_429(operator: APIClient) -> None:
    setup_boss(runtime={"max_actions_per_hour": 0})
    run = start_boss(operator)
    refused(
        delegate(operator, run, agent="reviewer", prompt="x"),
        429,
        "Rate limit exceeded: action budget exhausted",
    )


@pytest.mark.django_db
def test_delegation_forbidden_by_the_risk_profile_is_403(operator: APIClient) -> None:
    setup_boss(risk="closed", extra="[risk_profiles.closed]\n")
    run = start_boss(operator)
    refused(
        delegate(operator, run, agent="reviewer", prompt="x"),
        403,
        'delegation is forbidden for caller "boss" by risk profile "closed" delegation_policy; '
        'set [risk_profiles.closed].delegation_policy mode = "allow"',
    )
