"""The tab's websocket in scale-out (issue 17 item 2): a page open on one daphne hears, through
the Redis channel layer, that a list changed when a worker process changes it, with the count
of pending approvals for the nav badge."""

from __future__ import annotations

from typing import Any

from tests.distributed.conftest import (
    Cluster,
    WsClient,
    agent,
    load_config,
    provider,
    start_run,
    wait_terminal,
)

CONFIG = provider("notice", [{"turns": [{"sleep_ms": 300}, {"say": "noticed"}]}]) + agent(
    "noticer", "scripted.notice"
)


def changed(ws: WsClient, topic: str) -> list[dict[str, Any]]:
    return [
        m for m in ws.messages if isinstance(m, dict) and m.get("type") == "changed" and topic in m["topics"]
    ]


def test_a_page_on_one_daphne_hears_that_a_worker_changed_the_runs(cluster: Cluster) -> None:
    c = cluster
    load_config(c, CONFIG)
    ws = WsClient.connect(
        "127.0.0.1",
        c.daphne_ports[1],
        "/ws/live/",
        cookie=f"sessionid={c.session_cookie(1)}",
        origin=c.base_url(1),
    )
    try:
        run_id = start_run(c, "noticer", "tell the pages", index=0)
        wait_terminal(c, [run_id], timeout=60)
        # the run's end (written by a worker process) reaches the page on the other daphne
        assert ws.wait(lambda w: any(n["approvals"] == 0 for n in changed(w, "runs")), timeout=20), (
            ws.messages
        )
        notice = changed(ws, "runs")[-1]
        assert set(notice["topics"]) <= {"runs", "tasks", "home", "approvals"}
        assert not ws.closed
    finally:
        ws.close()
