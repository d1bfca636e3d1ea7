"""REST API of runs (SPEC §10): start, list, tree, events (JSON and SSE), transcript, cancel,
steer, continue, approvals, schedules, roles, and no 500 on junk."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from django.core.management import call_command
from rest_framework.test import APIClient

from runs_app import selectors
from runs_app.models import Approval, Run, RunEvent, Schedule
from runs_app.services import run_start
from tests.runs_app.api_support import child_of, client_for, parse_sse, send_raw, streamed
from tests.runs_app.helpers import configure, wait_for

GREET = """
[providers.models.scripted.greet]
model = "greet-1"
script = [
  { match = "^fail", turns = [ { error = "boom" } ] },
  { match = "^part:", turns = [ { say = "did {{prompt}}", usage = { input = 1400, output = 600 } } ] },
  { match = "^slow", turns = [ { sleep_ms = 800 }, { say = "slept" } ] },
  { match = "^spawn", turns = [
      { tool_calls = [ { name = "spawn_subagent", arguments = { prompt = "part: one" } } ], usage = { input = 2200, output = 400 } },
      { say = "summary: {{tool_results}}", usage = { input = 2600, output = 800 } },
  ] },
  { turns = [ { say = "hello {{prompt}}", usage = { input = 2000, output = 1000 } } ] },
]
[providers.models.scripted.greet.pricing]
# 0.5 and 1 cent per 100 tokens (prices are at most 10,000 cents per million)
input_per_mtok_cents = 5000
output_per_mtok_cents = 10000

[agents.greeter]
model_provider = "scripted.greet"
risk_profile = "team"

[agents.other]
model_provider = "scripted.greet"
risk_profile = "team"
"""

APPROVALS = """
[risk_profiles.careful]
always_ask = ["file_list"]
[risk_profiles.careful.delegation_policy]
mode = "allow"

[providers.models.scripted.lister]
model = "lister-1"
script = [
  { match = "^part:", turns = [
      { tool_calls = [ { name = "file_list", arguments = { path = "." } } ] },
      { say = "listed: {{tool_results}}" },
  ] },
  { turns = [
      { tool_calls = [ { name = "spawn_subagent", arguments = { prompt = "part: look around" } } ] },
      { say = "boss says: {{tool_results}}" },
  ] },
]

[agents.lister]
model_provider = "scripted.lister"
risk_profile = "careful"
"""


@pytest.fixture
def operator() -> APIClient:
    return client_for("olivia", "operator")


@pytest.fixture
def other_operator() -> APIClient:
    return client_for("oscar", "operator")


@pytest.fixture
def admin() -> APIClient:
    return client_for("ada", "admin")


@pytest.fixture
def viewer() -> APIClient:
    return client_for("victor", "viewer")


def start(client: APIClient, prompt: str, **extra: Any) -> Any:
    response = client.post("/api/v1/runs/", {"agent": "greeter", "prompt": prompt, **extra}, format="json")
    assert response.status_code == 201, response.content
    return response.json()


# -- start, list, detail --------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_starting_a_run_with_wait_answers_with_the_finished_run(worker: object, operator: APIClient) -> None:
    configure(GREET)
    body = start(operator, "world", wait=30)
    assert body["status"] == "completed"
    assert body["output"] == "hello world"
    assert body["kind"] == "top_level"
    assert body["root_id"] == body["id"]
    assert body["created_by"] == "olivia"
    assert body["session_key"] == f"run-{body['id']}"


@pytest.mark.django_db
def test_starting_a_run_without_wait_answers_at_once_with_the_queued_run(operator: APIClient) -> None:
    configure(GREET)
    body = start(operator, "world")
    assert body["status"] == "queued"
    assert body["spawn_site"] == "rest"
    assert operator.get(f"/api/v1/runs/{body['id']}/").json()["prompt"] == "world"


@pytest.mark.django_db
def test_repeated_posts_with_one_idempotency_key_start_one_run(operator: APIClient) -> None:
    configure(GREET)
    first = start(operator, "once", idempotency_key="k-1")
    second = start(operator, "once", idempotency_key="k-1")
    third = start(operator, "once", idempotency_key="k-2")
    assert first["id"] == second["id"] != third["id"]
    assert Run.objects.filter(idempotency_key="k-1").count() == 1


@pytest.mark.django_db
def test_one_idempotency_key_belongs_to_each_user(operator: APIClient, other_operator: APIClient) -> None:
    configure(GREET)
    mine = start(operator, "once", idempotency_key="shared")
    theirs = start(other_operator, "once", idempotency_key="shared")
    assert mine["id"] != theirs["id"]


@pytest.mark.django_db
def test_starting_an_unknown_agent_is_404_and_a_blank_prompt_is_400(operator: APIClient) -> None:
    configure(GREET)
    response = operator.post("/api/v1/runs/", {"agent": "nobody", "prompt": "x"}, format="json")
    assert response.status_code == 404
    assert response.json() == {"detail": "Unknown agent 'nobody'", "code": "not_found"}
    response = operator.post("/api/v1/runs/", {"agent": "greeter", "prompt": "  "}, format="json")
    assert response.status_code == 400
    assert response.json()["detail"] == "Missing or empty 'prompt' parameter"


@pytest.mark.django_db
def test_a_wait_beyond_300_seconds_is_refused(operator: APIClient) -> None:
    configure(GREET)
    response = operator.post("/api/v1/runs/", {"agent": "greeter", "prompt": "x", "wait": 301}, format="json")
    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == "wait"


@pytest.mark.django_db
def test_the_run_list_is_newest_first_and_filters_by_status_agent_kind_root_and_since(
    operator: APIClient,
) -> None:
    configure(GREET)
    a = start(operator, "a")
    b = start(operator, "b")
    c = operator.post("/api/v1/runs/", {"agent": "other", "prompt": "c"}, format="json").json()
    Run.objects.filter(pk=a["id"]).update(status="completed")
    child = operator.post(
        f"/api/v1/runs/{b['id']}/spawn/", {"prompt": "part: x", "wait": 0}, format="json"
    ).json()

    def ids(query: str) -> list[str]:
        response = operator.get(f"/api/v1/runs/{query}")
        assert response.status_code == 200, response.content
        return [r["id"] for r in response.json()["results"]]

    assert ids("") == [child["run_id"], c["id"], b["id"], a["id"]]
    assert ids("?agent=other") == [c["id"]]
    assert ids("?status=completed") == [a["id"]]
    assert set(ids("?status=queued,completed")) == {child["run_id"], c["id"], b["id"], a["id"]}
    assert ids("?kind=subagent") == [child["run_id"]]
    assert ids(f"?root={b['id']}") == [child["run_id"], b["id"]]
    assert ids("?since=2999-01-01T00:00:00Z") == []
    assert len(ids("?since=2000-01-01T00:00:00Z")) == 4
    page = operator.get("/api/v1/runs/?limit=2&offset=1").json()
    assert page["count"] == 4
    assert [r["id"] for r in page["results"]] == [c["id"], b["id"]]


@pytest.mark.django_db
def test_the_run_list_searches_prompts_outputs_and_errors_like_the_dashboard(operator: APIClient) -> None:
    configure(GREET)
    a = start(operator, "count the walruses")
    start(operator, "count the seals")
    Run.objects.filter(pk=a["id"]).update(output="thirty walruses")

    def ids(query: str) -> list[str]:
        response = operator.get(f"/api/v1/runs/?{query}")
        assert response.status_code == 200, response.content
        return [r["id"] for r in response.json()["results"]]

    assert ids("q=walrus") == [a["id"]]
    assert ids("q=thirty+walr") == [a["id"]]
    assert ids("q=walrus&status=failed") == []
    assert operator.get("/api/v1/runs/?q=" + "x" * 501).status_code == 400


@pytest.mark.django_db
def test_bad_run_list_filters_are_400(operator: APIClient) -> None:
    for query in ("status=sleeping", "kind=robot", "root=nope", "since=yesterday"):
        response = operator.get(f"/api/v1/runs/?{query}")
        assert response.status_code == 400, query
        assert "errors" in response.json()


@pytest.mark.django_db
def test_an_unknown_or_malformed_run_id_is_a_json_404(viewer: APIClient) -> None:
    for run_id in (uuid.uuid4(), "not-a-uuid"):
        for suffix in ("", "tree/", "events/", "transcript/"):
            response = viewer.get(f"/api/v1/runs/{run_id}/{suffix}")
            assert response.status_code == 404, (run_id, suffix)
            assert response.json()["code"] == "not_found"


# -- tree, transcript, events -----------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_the_tree_sums_usage_and_cost_over_each_subtree(worker: object, operator: APIClient) -> None:
    configure(GREET)
    root = start(operator, "spawn it", wait=30)
    assert root["status"] == "completed", root["error"]
    assert root["output"] == "summary: did part: one"
    child_id = Run.objects.get(parent_id=root["id"]).pk
    for run_id in (root["id"], child_id):
        tree = operator.get(f"/api/v1/runs/{run_id}/tree/").json()
        assert tree["id"] == root["id"]
        assert (tree["input_tokens"], tree["output_tokens"], tree["cost_cents"]) == (4800, 1200, 36)
        assert tree["subtree"] == {"runs": 2, "input_tokens": 6200, "output_tokens": 1800, "cost_cents": 49}
        [child] = tree["children"]
        assert child["id"] == str(child_id)
        assert child["kind"] == "subagent"
        assert child["output_preview"] == "did part: one"
        assert child["subtree"] == {"runs": 1, "input_tokens": 1400, "output_tokens": 600, "cost_cents": 13}


def _grow_tree(width: int, depth: int) -> Run:
    root = Run.objects.create(agent="greeter", input_tokens=1, output_tokens=1, cost_cents=1)
    Run.objects.filter(pk=root.pk).update(root=root)
    level = [root]
    for _ in range(depth):
        level = [
            Run.objects.create(agent="greeter", parent=parent, root=root, kind="subagent", input_tokens=1)
            for parent in level
            for _ in range(width)
        ]
    return root


@pytest.mark.django_db
def test_the_tree_is_read_in_one_query_whatever_its_size(django_assert_num_queries: Any) -> None:
    small, large = _grow_tree(width=1, depth=1), _grow_tree(width=3, depth=3)
    with django_assert_num_queries(1):
        small_tree = selectors.run_tree(small.pk)
    with django_assert_num_queries(1):
        large_tree = selectors.run_tree(large.pk)
    assert small_tree["subtree"]["runs"] == 2
    assert large_tree["subtree"]["runs"] == 1 + 3 + 9 + 27
    assert large_tree["subtree"]["input_tokens"] == 40
    assert large_tree["subtree"]["output_tokens"] == 1
    assert [len(c["children"]) for c in large_tree["children"]] == [3, 3, 3]


@pytest.mark.django_db(transaction=True)
def test_the_transcript_holds_messages_and_tool_calls_with_their_results(
    worker: object, operator: APIClient
) -> None:
    configure(GREET)
    root = start(operator, "spawn it", wait=30)
    transcript = operator.get(f"/api/v1/runs/{root['id']}/transcript/").json()
    assert [m["role"] for m in transcript["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert transcript["messages"][-1]["content"] == "summary: did part: one"
    [call] = transcript["tool_calls"]
    assert call["name"] == "spawn_subagent"
    assert call["arguments"] == {"prompt": "part: one"}
    assert call["status"] == "done"
    assert call["result"] == {"success": True, "output": "did part: one", "error": None}
    assert call["children"] == [str(Run.objects.get(parent_id=root["id"]).pk)]


@pytest.mark.django_db(transaction=True)
def test_the_event_log_of_a_root_run_covers_its_whole_tree_in_order(
    worker: object, viewer: APIClient
) -> None:
    configure(GREET)
    run = run_start(agent="greeter", prompt="spawn it")
    wait_for(run.pk)
    events = viewer.get(f"/api/v1/runs/{run.pk}/events/").json()
    ids = [e["id"] for e in events]
    assert ids == sorted(ids)
    assert ids == list(RunEvent.objects.filter(root_id=run.pk).order_by("id").values_list("id", flat=True))
    assert events[0]["type"] == "run.queued"
    assert events[-1]["type"] == "run.completed" and events[-1]["run_id"] == str(run.pk)
    assert len({e["run_id"] for e in events}) == 2
    later = viewer.get(f"/api/v1/runs/{run.pk}/events/?after={ids[2]}").json()
    assert [e["id"] for e in later] == ids[3:]
    child = Run.objects.get(parent=run)
    own = viewer.get(f"/api/v1/runs/{child.pk}/events/").json()
    assert own and {e["run_id"] for e in own} == {str(child.pk)}


@pytest.mark.django_db(transaction=True)
def test_the_event_stream_sends_a_live_run_in_sse_format_until_the_tree_is_finished(
    worker: object, viewer: APIClient
) -> None:
    configure(GREET)
    run = run_start(agent="greeter", prompt="slowly")
    response = viewer.get(f"/api/v1/runs/{run.pk}/events/?timeout=30", HTTP_ACCEPT="text/event-stream")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/event-stream")
    body = streamed(response)
    first = body.decode().split("\n\n")[0]
    assert first.startswith("id: ") and "\nevent: run.queued\ndata: {" in first
    events = parse_sse(body)
    assert [e["event"] for e in events][-1] == "run.completed"
    stored = list(RunEvent.objects.filter(root_id=run.pk).order_by("id"))
    assert [int(e["id"]) for e in events] == [e.id for e in stored]
    assert all(e["data"]["type"] == e["event"] and e["data"]["id"] == int(e["id"]) for e in events)
    assert events[-1]["data"]["data"]["output"] == "slept"


@pytest.mark.django_db(transaction=True)
def test_the_event_stream_resumes_after_the_last_event_id_header(worker: object, viewer: APIClient) -> None:
    configure(GREET)
    run = run_start(agent="greeter", prompt="hi")
    wait_for(run.pk)
    ids = list(RunEvent.objects.filter(root_id=run.pk).order_by("id").values_list("id", flat=True))
    response = viewer.get(
        f"/api/v1/runs/{run.pk}/events/?after=0",
        HTTP_ACCEPT="text/event-stream",
        HTTP_LAST_EVENT_ID=str(ids[1]),
    )
    assert [int(e["id"]) for e in parse_sse(streamed(response))] == ids[2:]


@pytest.mark.django_db
def test_the_event_stream_of_an_unfinished_run_ends_after_its_timeout(operator: APIClient) -> None:
    configure(GREET)
    run = start(operator, "never runs here")
    response = operator.get(f"/api/v1/runs/{run['id']}/events/?timeout=0.3", HTTP_ACCEPT="text/event-stream")
    events = parse_sse(streamed(response))
    assert [e["event"] for e in events] == ["run.queued"]


# -- cancel, steer, continue --------------------------------------------------------------------


@pytest.mark.django_db
def test_cancel_cascades_and_only_the_creator_or_an_admin_may_cancel(
    operator: APIClient, other_operator: APIClient, admin: APIClient, viewer: APIClient
) -> None:
    configure(GREET)
    root = start(operator, "tree")
    children = [
        operator.post(
            f"/api/v1/runs/{root['id']}/spawn/", {"prompt": f"part: {i}", "background": True}, format="json"
        ).json()["run_id"]
        for i in range(2)
    ]
    url = f"/api/v1/runs/{root['id']}/cancel/"
    assert viewer.post(url).status_code == 403
    refused = other_operator.post(url)
    assert refused.status_code == 403
    assert refused.json() == {
        "detail": "Only the run's creator or an admin may cancel it.",
        "code": "permission_denied",
    }
    done = admin.post(url)
    assert done.status_code == 200
    assert done.json()["cancelled"] == 3
    assert done.json()["run"]["status"] == "cancelled"
    assert Run.objects.get(pk=root["id"]).error == "Cancelled by user request"
    assert {Run.objects.get(pk=c).error for c in children} == {"Cancelled by parent session"}
    again = admin.post(url)
    assert again.status_code == 409
    assert again.json() == {"detail": "Run is already cancelled", "code": "conflict"}


@pytest.mark.django_db
def test_the_creator_may_cancel_a_child_of_their_run(operator: APIClient) -> None:
    configure(GREET)
    root = start(operator, "tree")
    child = operator.post(
        f"/api/v1/runs/{root['id']}/spawn/", {"prompt": "part: x", "background": True}, format="json"
    ).json()["run_id"]
    response = operator.post(f"/api/v1/runs/{child}/cancel/")
    assert response.status_code == 200
    assert response.json()["cancelled"] == 1
    assert Run.objects.get(pk=root["id"]).status == "queued"


@pytest.mark.django_db
def test_steering_takes_a_message_of_at_most_4000_characters(
    operator: APIClient, other_operator: APIClient
) -> None:
    configure(GREET)
    run = start(operator, "steer me")
    url = f"/api/v1/runs/{run['id']}/steer/"
    too_long = operator.post(url, {"message": "x" * 4001}, format="json")
    assert too_long.status_code == 400
    assert too_long.json() == {"detail": "Message too long (4001 chars, max 4000).", "code": "invalid"}
    blank = operator.post(url, {}, format="json")
    assert blank.status_code == 400
    assert blank.json()["detail"] == "Missing or empty 'message' parameter"
    assert other_operator.post(url, {"message": "turn left"}, format="json").status_code == 403
    ok = operator.post(url, {"message": "y" * 4000}, format="json")
    assert ok.status_code == 202
    assert ok.json()["run_id"] == run["id"]
    assert RunEvent.objects.filter(run_id=run["id"], type="run.steered").count() == 1


@pytest.mark.django_db(transaction=True)
def test_continue_starts_a_new_run_from_a_finished_conversation(worker: object, operator: APIClient) -> None:
    configure(GREET)
    first = start(operator, "one", wait=30)
    response = operator.post(f"/api/v1/runs/{first['id']}/continue/", {"prompt": "two"}, format="json")
    assert response.status_code == 201
    second = wait_for(response.json()["id"])
    assert second.continued_from_id == uuid.UUID(first["id"])
    assert second.output == "hello two"
    contents = [
        m["content"] for m in operator.get(f"/api/v1/runs/{second.pk}/transcript/").json()["messages"]
    ]
    assert contents == ["one", "hello one", "two", "hello two"]


@pytest.mark.django_db
def test_continue_refuses_a_run_still_going_and_resume_refuses_a_run_not_lost(operator: APIClient) -> None:
    configure(GREET)
    run = start(operator, "busy")
    response = operator.post(f"/api/v1/runs/{run['id']}/continue/", {"prompt": "more"}, format="json")
    assert response.status_code == 409
    response = operator.post(f"/api/v1/runs/{run['id']}/resume/")
    assert response.status_code == 409
    assert response.json()["detail"] == "Only a lost run can be resumed (status: queued)"


@pytest.mark.django_db
def test_resume_starts_a_new_run_from_a_lost_one(operator: APIClient) -> None:
    configure(GREET)
    run = start(operator, "lost soul")
    Run.objects.filter(pk=run["id"]).update(status="lost")
    response = operator.post(f"/api/v1/runs/{run['id']}/resume/")
    assert response.status_code == 201
    assert response.json()["status"] == "queued"
    assert Run.objects.get(pk=response.json()["id"]).continued_from_id == uuid.UUID(run["id"])


# -- approvals ----------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_approvals_list_pending_calls_with_their_chain_and_approve_resumes_the_run(
    worker: object, operator: APIClient, viewer: APIClient
) -> None:
    configure(APPROVALS)
    root = operator.post("/api/v1/runs/", {"agent": "lister", "prompt": "look"}, format="json").json()
    child = child_of(root["id"])
    wait_for(child.pk, {"awaiting_approval"})
    [pending] = viewer.get("/api/v1/approvals/").json()
    assert pending["status"] == "pending"
    assert pending["tool"] == "file_list"
    assert pending["arguments"] == {"path": "."}
    assert pending["run_id"] == str(child.pk)
    assert pending["chain"] == [
        {"run_id": root["id"], "agent": "lister", "kind": "top_level", "mode": ""},
        {"run_id": str(child.pk), "agent": "lister", "kind": "subagent", "mode": ""},
    ]
    assert viewer.post(f"/api/v1/approvals/{pending['id']}/approve/").status_code == 403
    decided = operator.post(f"/api/v1/approvals/{pending['id']}/approve/")
    assert decided.status_code == 200
    assert decided.json()["status"] == "approved"
    assert decided.json()["decided_by"] == "olivia"
    finished = wait_for(root["id"])
    assert finished.status == "completed", finished.error
    assert finished.output.startswith("boss says: listed: ")
    types = set(RunEvent.objects.filter(run_id=child.pk).values_list("type", flat=True))
    assert {"approval.requested", "approval.decided"} <= types
    again = operator.post(f"/api/v1/approvals/{pending['id']}/approve/")
    assert again.status_code == 409


@pytest.mark.django_db(transaction=True)
def test_a_denied_call_gives_the_model_the_operators_reason_and_pending_ones_come_first(
    worker: object, operator: APIClient
) -> None:
    configure(APPROVALS)
    first = operator.post("/api/v1/runs/", {"agent": "lister", "prompt": "one"}, format="json").json()
    wait_for(child_of(first["id"]).pk, {"awaiting_approval"})
    [approval] = operator.get("/api/v1/approvals/?status=pending").json()
    denied = operator.post(f"/api/v1/approvals/{approval['id']}/deny/", {"reason": "not now"}, format="json")
    assert denied.status_code == 200
    assert denied.json()["status"] == "denied" and denied.json()["reason"] == "not now"
    assert wait_for(first["id"]).output == "boss says: listed: Error: Tool call denied by operator: not now"
    second = operator.post("/api/v1/runs/", {"agent": "lister", "prompt": "two"}, format="json").json()
    wait_for(child_of(second["id"]).pk, {"awaiting_approval"})
    listed = operator.get("/api/v1/approvals/").json()
    assert [a["status"] for a in listed] == ["pending", "denied"]
    assert operator.get("/api/v1/approvals/?status=denied").json()[0]["id"] == approval["id"]
    assert Approval.objects.count() == 2


@pytest.mark.django_db
def test_an_unknown_approval_is_404(operator: APIClient) -> None:
    for approval_id in ("12345", "abc"):
        assert operator.post(f"/api/v1/approvals/{approval_id}/approve/").status_code == 404
        assert operator.post(f"/api/v1/approvals/{approval_id}/deny/", {}, format="json").status_code == 404


# -- schedules ----------------------------------------------------------------------------------


@pytest.mark.django_db
def test_schedules_are_created_listed_changed_and_deleted_with_a_valid_cron(
    operator: APIClient, viewer: APIClient
) -> None:
    configure(GREET)
    body = {"name": "nightly", "agent": "greeter", "prompt": "report", "cron": "0 3 * * *"}
    assert viewer.post("/api/v1/schedules/", body, format="json").status_code == 403
    bad = operator.post("/api/v1/schedules/", {**body, "cron": "every night"}, format="json")
    assert bad.status_code == 400
    assert bad.json()["errors"] == [
        {
            "field": "cron",
            "message": 'cron expression "every night" must have five fields '
            "(minute hour day-of-month month day-of-week); got 2",
        }
    ]
    unknown = operator.post("/api/v1/schedules/", {**body, "agent": "nobody"}, format="json")
    assert unknown.json()["errors"] == [{"field": "agent", "message": "Unknown agent 'nobody'"}]
    created = operator.post("/api/v1/schedules/", body, format="json")
    assert created.status_code == 201
    schedule = created.json()
    assert schedule["enabled"] is True and schedule["created_by"] == "olivia"
    assert [s["name"] for s in viewer.get("/api/v1/schedules/").json()] == ["nightly"]
    url = f"/api/v1/schedules/{schedule['id']}/"
    assert operator.patch(url, {"enabled": False}, format="json").json()["enabled"] is False
    assert operator.put(url, {**body, "cron": "*/5 * * * *"}, format="json").json()["cron"] == "*/5 * * * *"
    assert operator.delete(url).status_code == 204
    assert not Schedule.objects.exists()
    assert operator.get(url).status_code == 404
    assert operator.get("/api/v1/schedules/nope/").status_code == 404


# -- roles and junk -----------------------------------------------------------------------------

POST_URLS = (
    "/api/v1/runs/",
    "/api/v1/runs/{run}/spawn/",
    "/api/v1/runs/{run}/delegate/",
    "/api/v1/runs/{run}/cancel/",
    "/api/v1/runs/{run}/steer/",
    "/api/v1/runs/{run}/continue/",
    "/api/v1/runs/{run}/resume/",
    "/api/v1/approvals/1/approve/",
    "/api/v1/approvals/1/deny/",
    "/api/v1/results/{run}/cancel/",
    "/api/v1/results/await/",
    "/api/v1/schedules/",
)


@pytest.mark.django_db
def test_anonymous_requests_are_401() -> None:
    client = APIClient()
    run = str(uuid.uuid4())
    for url in ("/api/v1/runs/", f"/api/v1/runs/{run}/", "/api/v1/approvals/", "/api/v1/results/"):
        response = client.get(url)
        assert response.status_code == 401, url
        assert response.json()["code"] == "not_authenticated"
    for url in POST_URLS:
        assert client.post(url.format(run=run), {}, format="json").status_code == 401, url


@pytest.mark.django_db
def test_viewers_read_but_every_post_is_403(viewer: APIClient, operator: APIClient) -> None:
    configure(GREET)
    run = start(operator, "watch me")["id"]
    assert viewer.get("/api/v1/runs/").status_code == 200
    assert viewer.get(f"/api/v1/runs/{run}/tree/").status_code == 200
    for url in POST_URLS:
        response = viewer.post(url.format(run=run), {"agent": "greeter", "prompt": "x"}, format="json")
        assert response.status_code == 403, url
    assert Run.objects.count() == 1


JUNK_BODIES: tuple[tuple[str | bytes, str], ...] = (
    ("[1, 2]", "application/json"),
    ('"text"', "application/json"),
    ("42", "application/json"),
    ("null", "application/json"),
    ("{", "application/json"),
    ("[" * 5000 + "]" * 5000, "application/json"),
    ('{"agent": ["x"], "prompt": {"a": 1}, "wait": "soon", "message": [], "reason": {}, '
     '"task_ids": "x", "timeout_ms": "y", "action": 5, "background": "maybe", "parallel": 3, '
     '"task_name": 7, "label": [], "context": 1.5, "idempotency_key": {}}', "application/json"),
    ("agent=greeter&prompt=x", "application/x-www-form-urlencoded"),
    (b"\xff\xfe{}", "application/json"),
)  # fmt: skip


@pytest.mark.django_db
def test_junk_bodies_never_cause_a_server_error(operator: APIClient, admin: APIClient) -> None:
    configure(GREET)
    run = start(operator, "target")["id"]
    schedule = Schedule.objects.create(name="s", agent="greeter", prompt="p", cron="* * * * *")
    for client in (operator, admin):
        for url in (*POST_URLS, f"/api/v1/schedules/{schedule.pk}/"):
            for body, content_type in JUNK_BODIES:
                response = send_raw(
                    client,
                    "PATCH" if "schedules/" in url and url[-2].isdigit() else "POST",
                    url.format(run=run),
                    body.encode() if isinstance(body, str) else body,
                    content_type,
                )
                assert response.status_code < 500, (url, body[:40], response.content[:200])
    assert Run.objects.count() == 1


@pytest.mark.django_db
def test_bad_ids_in_paths_are_404_or_the_tools_own_400(operator: APIClient) -> None:
    for url in ("/api/v1/runs/nope/spawn/", "/api/v1/runs/nope/delegate/"):
        response = operator.post(url, {"prompt": "x"}, format="json")
        assert response.status_code == 404
        assert response.json() == {"success": False, "output": "", "error": "No run 'nope'"}
    for url in ("/api/v1/runs/nope/cancel/", "/api/v1/runs/nope/resume/"):
        assert operator.post(url).status_code == 404
    response = operator.get("/api/v1/results/nope/")
    assert response.status_code == 400
    assert response.json()["error"] == "Invalid task_id 'nope': must be a valid UUID"


@pytest.mark.django_db
def test_the_openapi_schema_generates_without_warnings(viewer: APIClient, tmp_path: Any) -> None:
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "schema.yml"))
    schema = viewer.get("/api/schema/?format=json").json()
    operations = {
        op["operationId"]
        for item in schema["paths"].values()
        for op in item.values()
        if isinstance(op, dict) and "operationId" in op
    }
    assert {
        "runs_start",
        "runs_spawn",
        "runs_delegate",
        "runs_events",
        "results_await",
        "schedules_destroy",
    } <= operations
    assert json.dumps(schema)
