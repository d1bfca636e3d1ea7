"""The run page of a big finished tree: a fixed number of SQL queries, children in pages of 50."""

from __future__ import annotations

import re

from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from runs_app.models import Run
from tests.dashboard.support import bulk_tree, text_of


def queries_for(client: Client, url: str) -> tuple[int, str]:
    client.get(url)  # warm caches that are not about the tree (session, role)
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(url)
    assert response.status_code == 200
    return len(ctx.captured_queries), response.content.decode()


def test_the_run_page_query_count_does_not_grow_with_the_tree(viewer: Client) -> None:
    small = bulk_tree(10)
    big = bulk_tree(1000)
    n_small, body_small = queries_for(viewer, f"/runs/{small.pk}/")
    n_big, body_big = queries_for(viewer, f"/runs/{big.pk}/")
    assert body_small.count('<li class="node"') == 10
    assert body_big.count('<li class="node"') == 1000
    assert n_small == n_big
    # the live refresh of many nodes at once is just as flat
    ids_small = ",".join(str(pk) for pk in Run.objects.filter(root_id=small.pk).values_list("pk", flat=True))
    ids_big = ",".join(
        str(pk) for pk in Run.objects.filter(root_id=big.pk).values_list("pk", flat=True)[:200]
    )
    assert (
        queries_for(viewer, f"/runs/{small.pk}/nodes/?ids={ids_small}")[0]
        == queries_for(viewer, f"/runs/{big.pk}/nodes/?ids={ids_big}")[0]
    )


def test_the_root_shows_its_subtree_sums(viewer: Client) -> None:
    root = bulk_tree(1000)
    body = text_of(viewer.get(f"/runs/{root.pk}/"))
    assert (
        f'<span class="meta tokens" id="run-{root.pk}-tokens">3+2 tok · $0.0001 (subtree 1,000 runs: 3,000+2,000 tok · $0.10)</span>'
        in body
    )


def node_ids(body: str) -> list[str]:
    return re.findall(r'<li class="node" id="run-([0-9a-f-]{36})"', body)


def test_children_beyond_fifty_load_on_demand(viewer: Client) -> None:
    root = bulk_tree(121, fanout=200)  # one root with 120 children
    children = [
        str(pk)
        for pk in Run.objects.filter(parent_id=root.pk)
        .order_by("created_at", "id")
        .values_list("pk", flat=True)
    ]
    body = viewer.get(f"/runs/{root.pk}/").content.decode()
    assert node_ids(body) == [str(root.pk), *children[:50]]
    assert f'hx-get="/runs/{root.pk}/children/?offset=50"' in body
    assert "Show 70 more children" in body

    batch = viewer.get(f"/runs/{root.pk}/children/?offset=50").content.decode()
    assert node_ids(batch) == children[50:100]
    assert f'hx-get="/runs/{root.pk}/children/?offset=100"' in batch
    assert "Show 20 more children" in batch

    last = viewer.get(f"/runs/{root.pk}/children/?offset=100").content.decode()
    assert node_ids(last) == children[100:]
    assert "more children" not in last

    assert viewer.get(f"/runs/{root.pk}/children/?offset=nonsense").status_code == 200
    assert viewer.get("/runs/00000000-0000-0000-0000-000000000000/children/?offset=50").status_code == 404


def test_the_nodes_endpoint_sends_new_nodes_with_their_parent(viewer: Client) -> None:
    root = bulk_tree(3, fanout=2)
    child = Run.objects.filter(parent_id=root.pk).order_by("created_at", "id").first()
    assert child is not None
    body = viewer.get(f"/runs/{root.pk}/nodes/?ids={root.pk}&new={child.pk}").content.decode()
    assert f'<div class="node-head" id="run-{root.pk}-head" hx-swap-oob="true"' in body
    assert f'<template data-new-node="{child.pk}" data-parent="{root.pk}">' in body
    assert f'<li class="node" id="run-{child.pk}" data-parent="{root.pk}"' in body


def test_a_run_page_of_a_child_shows_its_whole_tree(viewer: Client) -> None:
    root = bulk_tree(5, fanout=2)
    child = Run.objects.filter(parent_id=root.pk).first()
    assert child is not None
    body = viewer.get(f"/runs/{child.pk}/").content.decode()
    assert f'data-root="{root.pk}"' in body
    assert f'data-focus="{child.pk}"' in body
    assert len(node_ids(body)) == 5
    assert viewer.get("/runs/00000000-0000-0000-0000-000000000000/").status_code == 404
