"""`GET /api/v1/runs/{id}/tree/` of big trees: a fixed number of SQL queries, every node with
its previews cut, its parent and its subtree sums."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from runs_app import selectors
from runs_app.models import Run
from tests.dashboard.support import bulk_tree
from tests.runs_app.api_support import client_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def viewer() -> APIClient:
    return client_for("victor", "viewer")


def tree_and_queries(client: APIClient, run_id: Any) -> tuple[dict[str, Any], int]:
    url = f"/api/v1/runs/{run_id}/tree/"
    client.get(url)  # warm what is not about the tree
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(url)
    assert response.status_code == 200
    return response.json(), len(ctx.captured_queries)


def all_nodes(tree: dict[str, Any]) -> list[dict[str, Any]]:
    found, stack = [], [tree]
    while stack:
        node = stack.pop()
        found.append(node)
        stack.extend(node["children"])
    return found


def test_the_tree_query_count_does_not_grow_with_the_tree(viewer: APIClient) -> None:
    small, big = bulk_tree(10), bulk_tree(1000)
    small_tree, n_small = tree_and_queries(viewer, small.pk)
    big_tree, n_big = tree_and_queries(viewer, big.pk)
    assert n_small == n_big
    assert len(all_nodes(small_tree)) == 10
    assert len(all_nodes(big_tree)) == 1000
    sums = {"runs": 1000, "input_tokens": 3000, "output_tokens": 2000, "cost_cents": 10.0}
    assert big_tree["subtree"] == sums
    # the tree of a child is its root's
    child = Run.objects.filter(parent_id=big.pk).first()
    assert child is not None
    assert tree_and_queries(viewer, child.pk) == (big_tree, n_big)


def test_every_node_has_its_parent_previews_times_and_sums(viewer: APIClient) -> None:
    root = bulk_tree(13, fanout=3)
    long_text = "é😀<" * 300  # 900 characters, some outside the BMP
    Run.objects.filter(root_id=root.pk).exclude(pk=root.pk).update(prompt=long_text, output=long_text)
    tree, _ = tree_and_queries(viewer, root.pk)
    nodes = {n["id"]: n for n in all_nodes(tree)}
    runs = {str(r.pk): r for r in Run.objects.filter(root_id=root.pk)}
    assert nodes.keys() == runs.keys()
    for node_id, node in nodes.items():
        run = runs[node_id]
        assert node["parent_id"] == (str(run.parent_id) if run.parent_id else None)
        assert all(child["parent_id"] == node_id for child in node["children"])
        assert node["prompt_preview"] == run.prompt[: selectors.PREVIEW_CHARS]
        assert node["output_preview"] == run.output[: selectors.PREVIEW_CHARS]
        assert run.started_at is not None and run.finished_at is not None
        assert node["created_at"] == run.created_at.isoformat()
        assert node["started_at"] == run.started_at.isoformat()
        assert node["finished_at"] == run.finished_at.isoformat()
        assert node["duration_secs"] == 2.0
        assert node["subtree"]["runs"] == 1 + sum(c["subtree"]["runs"] for c in node["children"])
    assert nodes[str(root.pk)]["prompt_preview"] == "part 0"
    assert len(nodes[str(root.pk)]["children"][0]["prompt_preview"]) == selectors.PREVIEW_CHARS


def test_a_child_created_before_its_parent_is_still_under_it() -> None:
    root = bulk_tree(3, fanout=1)  # root -> a -> b
    a = Run.objects.get(parent_id=root.pk)
    b = Run.objects.get(parent_id=a.pk)
    Run.objects.filter(pk=b.pk).update(created_at=root.created_at - timedelta(seconds=5))
    tree = selectors.run_tree(root.pk)
    assert [c["id"] for c in tree["children"]] == [str(a.pk)]
    assert [c["id"] for c in tree["children"][0]["children"]] == [str(b.pk)]
    assert tree["subtree"]["runs"] == 3
    with pytest.raises(Run.DoesNotExist):
        selectors.run_tree(a.pk)  # not a root
