"""Authorization matrix: every URL pattern of the project × {anonymous, no role, viewer,
operator, admin}, with the least role each (method, route) needs.

The table below is checked against the URL configuration itself (`get_resolver()`, walked
recursively, and the websocket routes): a pattern missing from it fails the test, so a new
endpoint must say who may call it. For every (method, route), with path parameters filled
with real objects:

- anonymous: 401 from the API, a redirect to /accounts/login/ from a page;
- a user below the least role: 403;
- a user at or above it: never 401 or 403 (a 400, 404 or 409 for the dummy body is fine),
  and never a 5xx.

The Django admin site (`admin/…`) has its own rule: staff only (the admin role), anyone else
is sent to its login page. Ownership (only a run's creator or an admin may cancel or steer
it) and CSRF on session-authenticated requests are checked at the end."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib import admin as admin_site
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver
from rest_framework.test import APIClient

from agents_app.models import ConfigRevision
from agents_app.users import user_create_or_update
from runs_app.models import Run, Schedule
from runs_app.routing import websocket_urlpatterns
from tests.dashboard.support import Runs, load_config
from zeroclaw_site.asgi import application

PUBLIC, LOGIN, VIEWER, OPERATOR, ADMIN = "public", "login", "viewer", "operator", "admin"
RANK = {PUBLIC: 0, LOGIN: 1, VIEWER: 2, OPERATOR: 3, ADMIN: 4}
# Who calls: None is anonymous, "" an authenticated user without a role.
CALLERS: dict[str, str | None] = {"anonymous": None, "norole": "", "viewer": VIEWER, "operator": OPERATOR}
CALLERS["admin"] = ADMIN
CALLER_RANK = {"anonymous": 0, "norole": 1, "viewer": 2, "operator": 3, "admin": 4}

KINDS = ("agents", "risk-profiles", "runtime-profiles", "providers")
# Configuration kinds edited on the MCP page (no list page nor live preview of their own).
MCP_KINDS = ("mcp/servers", "mcp/bundles")

# (route as the resolver spells it) -> {method: least role}
API: dict[str, dict[str, str]] = {
    "api/schema/": {"GET": PUBLIC},
    "api/docs/": {"GET": PUBLIC},
    "api/redoc/": {"GET": PUBLIC},
    "api/v1/health/": {"GET": PUBLIC},
    "api/v1/agents/<str:key>/roster/": {"GET": VIEWER},
    "api/v1/agents/<str:key>/tools/": {"GET": VIEWER},
    "api/v1/agents/<str:key>/mcp-servers/": {"GET": VIEWER},
    "api/v1/mcp/": {"GET": VIEWER, "PUT": ADMIN, "PATCH": ADMIN},
    "api/v1/mcp/import/": {"POST": ADMIN},
    "api/v1/policy/check/": {"POST": VIEWER},
    "api/v1/config/": {"GET": VIEWER, "POST": ADMIN},
    "api/v1/config/revisions/": {"GET": VIEWER},
    "api/v1/config/revisions/<int:pk>/": {"GET": VIEWER},
    "api/v1/config/revisions/<int:pk>/restore/": {"POST": ADMIN},
    "api/v1/runs/": {"GET": VIEWER, "POST": OPERATOR},
    "api/v1/runs/<str:run_id>/": {"GET": VIEWER},
    "api/v1/runs/<str:run_id>/tree/": {"GET": VIEWER},
    "api/v1/runs/<str:run_id>/events/": {"GET": VIEWER},
    "api/v1/runs/<str:run_id>/transcript/": {"GET": VIEWER},
    "api/v1/runs/<str:run_id>/spawn/": {"POST": OPERATOR},
    "api/v1/runs/<str:run_id>/delegate/": {"POST": OPERATOR},
    "api/v1/runs/<str:run_id>/cancel/": {"POST": OPERATOR},
    "api/v1/runs/<str:run_id>/steer/": {"POST": OPERATOR},
    "api/v1/runs/<str:run_id>/continue/": {"POST": OPERATOR},
    "api/v1/runs/<str:run_id>/resume/": {"POST": OPERATOR},
    "api/v1/approvals/": {"GET": VIEWER},
    "api/v1/approvals/<str:approval_id>/approve/": {"POST": OPERATOR},
    "api/v1/approvals/<str:approval_id>/deny/": {"POST": OPERATOR},
    "api/v1/results/": {"GET": VIEWER},
    "api/v1/results/await/": {"POST": OPERATOR},
    "api/v1/results/<str:task_id>/": {"GET": VIEWER},
    "api/v1/results/<str:task_id>/cancel/": {"POST": OPERATOR},
    "api/v1/schedules/": {"GET": VIEWER, "POST": OPERATOR},
    "api/v1/schedules/<str:schedule_id>/": {
        "GET": VIEWER,
        "PUT": OPERATOR,
        "PATCH": OPERATOR,
        "DELETE": OPERATOR,
    },
    # Any other URL under /api/v1/: the API's JSON 404, to anyone.
    "api/v1/^.*$": {"GET": PUBLIC, "POST": PUBLIC},
}
for _kind in KINDS + MCP_KINDS:
    API[f"api/v1/{_kind}/"] = {"GET": VIEWER, "POST": ADMIN}
    API[f"api/v1/{_kind}/<str:key>/"] = {"GET": VIEWER, "PUT": ADMIN, "PATCH": ADMIN, "DELETE": ADMIN}

PAGES: dict[str, dict[str, str]] = {
    "favicon.ico": {"GET": PUBLIC},
    "accounts/login/": {"GET": PUBLIC, "POST": PUBLIC},
    "accounts/logout/": {"POST": PUBLIC},
    "accounts/password_change/": {"GET": LOGIN, "POST": LOGIN},
    "accounts/password_change/done/": {"GET": LOGIN},
    "accounts/password_reset/": {"GET": PUBLIC, "POST": PUBLIC},
    "accounts/password_reset/done/": {"GET": PUBLIC},
    "accounts/reset/<uidb64>/<token>/": {"GET": PUBLIC},
    "accounts/reset/done/": {"GET": PUBLIC},
    "": {"GET": VIEWER},
    "home/live/": {"GET": VIEWER},
    "home/charts/": {"GET": VIEWER},
    "runs/": {"GET": VIEWER},
    "runs/start/": {"POST": OPERATOR},
    "runs/<uuid:run_id>/": {"GET": VIEWER},
    "runs/<uuid:run_id>/children/": {"GET": VIEWER},
    "runs/<uuid:run_id>/detail/": {"GET": VIEWER},
    "runs/<uuid:run_id>/controls/": {"GET": VIEWER},
    "runs/<uuid:root_id>/nodes/": {"GET": VIEWER},
    "runs/<uuid:run_id>/cancel/": {"GET": OPERATOR, "POST": OPERATOR},
    "runs/<uuid:run_id>/steer/": {"POST": OPERATOR},
    "runs/<uuid:run_id>/resume/": {"POST": OPERATOR},
    "runs/<uuid:run_id>/continue/": {"POST": OPERATOR},
    "runs/<uuid:run_id>/conversation/": {"GET": VIEWER},
    "approvals/": {"GET": VIEWER},
    "approvals/live/": {"GET": VIEWER},
    "approvals/bulk/": {"POST": OPERATOR},
    "approvals/<int:approval_id>/<str:decision>/": {"POST": OPERATOR},
    "tasks/": {"GET": VIEWER},
    "tasks/live/": {"GET": VIEWER},
    "schedules/": {"GET": VIEWER, "POST": OPERATOR},
    "schedules/preview/": {"GET": VIEWER},
    "schedules/<int:schedule_id>/enabled/": {"POST": OPERATOR},
    "schedules/<int:schedule_id>/delete/": {"GET": OPERATOR, "POST": OPERATOR},
    "delegation-map/": {"GET": VIEWER},
    "delegation-map/simulate/": {"POST": VIEWER},
    "config/": {"GET": VIEWER},
    "config/import/preview/": {"POST": ADMIN},
    "config/import/": {"POST": ADMIN},
    "config/revisions/<int:pk>/": {"GET": VIEWER},
    "config/revisions/<int:pk>/restore/": {"POST": ADMIN},
    "mcp/": {"GET": VIEWER},
    "mcp/state/": {"GET": VIEWER},
    "mcp/settings/": {"POST": ADMIN},
    "mcp/import/preview/": {"POST": ADMIN},
    "mcp/import/": {"POST": ADMIN},
}
for _kind in MCP_KINDS:
    PAGES.update(
        {
            f"{_kind}/": {"GET": VIEWER},
            f"{_kind}/new/": {"GET": VIEWER, "POST": ADMIN},
            f"{_kind}/<str:key>/": {"GET": VIEWER, "POST": ADMIN},
            f"{_kind}/<str:key>/delete/": {"GET": ADMIN, "POST": ADMIN},
        }
    )
for _kind in KINDS:
    PAGES.update(
        {
            f"{_kind}/": {"GET": VIEWER},
            f"{_kind}/new/": {"GET": VIEWER, "POST": ADMIN},
            f"{_kind}/preview/": {"POST": VIEWER},
            f"{_kind}/<str:key>/": {"GET": VIEWER, "POST": ADMIN},
            f"{_kind}/<str:key>/preview/": {"POST": VIEWER},
            f"{_kind}/<str:key>/delete/": {"GET": ADMIN, "POST": ADMIN},
        }
    )

WEBSOCKETS: dict[str, str] = {
    "ws/runs/<uuid:root_id>/": VIEWER,
    "ws/live/": VIEWER,
    "": "nobody",  # every other path: 404, whoever asks
}
ADMIN_SITE_PREFIX = "admin/"

KEYS = {
    "agents": "alpha",
    "risk-profiles": "team",
    "runtime-profiles": "agentic",
    "providers": "scripted.demo",
    "mcp/servers": "sample",
    "mcp/bundles": "kit",
}


def walk(patterns: list[Any], prefix: str = "") -> Iterator[tuple[str, URLPattern]]:
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            yield from walk(pattern.url_patterns, prefix + str(pattern.pattern))
        else:
            yield prefix + str(pattern.pattern), pattern


def project_routes() -> dict[str, URLPattern]:
    return dict(walk(get_resolver().url_patterns))


def cases() -> list[tuple[str, str, str]]:
    table = [("api", r, m) for r, methods in API.items() for m in methods]
    table += [("page", r, m) for r, methods in PAGES.items() for m in methods]
    return table


# -- the table covers the project --------------------------------------------------------------


def test_every_url_pattern_is_in_the_matrix() -> None:
    routes = project_routes()
    known = set(API) | set(PAGES)
    missing = [r for r in routes if r not in known and not r.startswith(ADMIN_SITE_PREFIX)]
    assert not missing, f"add these URL patterns to the authorization matrix: {missing}"
    stale = sorted(known - set(routes))
    assert not stale, f"these matrix rows match no URL pattern any more: {stale}"
    ws_routes = {str(p.pattern) for p in websocket_urlpatterns}
    assert ws_routes == set(WEBSOCKETS), f"websocket routes changed: {ws_routes ^ set(WEBSOCKETS)}"


def test_every_method_an_api_view_answers_is_in_the_matrix() -> None:
    routes = project_routes()
    for route, methods in API.items():
        view_class = getattr(routes[route].callback, "view_class", None)
        if view_class is None:
            continue  # a plain function (the JSON 404)
        served = {
            m.upper()
            for m in view_class.http_method_names
            if m not in ("options", "head") and hasattr(view_class, m)
        }
        assert served == set(methods), (
            f"{route}: the view answers {sorted(served)}, the matrix says {sorted(methods)}"
        )


# -- objects for the path parameters ---------------------------------------------------------------


class World:
    """Users of each role, and one real object for each kind of path parameter (the runs
    belong to the operator, so that ownership rules let the operator through)."""

    def __init__(self) -> None:
        load_config()
        self.users: dict[str, Any] = {"anonymous": None}
        self.users["norole"] = get_user_model().objects.create_user(username="nora", password="pw-12345678")
        self.tokens: dict[str, str] = {}
        for name, role in (("viewer", VIEWER), ("operator", OPERATOR), ("admin", ADMIN)):
            user, _, token = user_create_or_update(username=f"{name}-user", role=role)
            self.users[name] = user
            self.tokens[name] = token
        runs = Runs()
        Run.objects.all().update(created_by=self.users["operator"])
        self.root, self.task, self.approval = runs.root, runs.task, runs.approval
        self.schedule = Schedule.objects.create(
            name="nightly", agent="alpha", prompt="go", cron="0 3 * * *", created_by=self.users["operator"]
        )
        self.revision = ConfigRevision.objects.order_by("-pk").first()
        assert self.revision is not None

    def path(self, route: str) -> str:
        if route == "api/v1/^.*$":
            return "/api/v1/no-such-endpoint/"
        values = {
            "run_id": str(self.root.pk),
            "root_id": str(self.root.pk),
            "task_id": str(self.task.pk),
            "approval_id": str(self.approval.pk),
            "decision": "approve",
            "schedule_id": str(self.schedule.pk),
            "pk": str(self.revision.pk if self.revision else 1),
            "alias": "alpha",
            "uidb64": "MQ",
            "token": "not-a-token",
        }
        kind = next((k for k in KINDS + MCP_KINDS if route.startswith((f"{k}/", f"api/v1/{k}/"))), None)
        if kind is not None:
            values["key"] = KEYS[kind]

        def fill(match: re.Match[str]) -> str:
            return values[match.group(1)]

        return "/" + re.sub(r"<(?:\w+:)?(\w+)>", fill, route)

    def api(self, caller: str) -> APIClient:
        client = APIClient()
        if caller == "norole":
            client.force_authenticate(self.users["norole"])
        elif caller in self.tokens:
            client.credentials(HTTP_AUTHORIZATION=f"Token {self.tokens[caller]}")
        return client

    def browser(self, caller: str) -> Client:
        client = Client()
        if self.users.get(caller) is not None:
            client.force_login(self.users[caller])
        return client


@pytest.fixture(autouse=True)
def _fast_passwords(settings: Any) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def world(db: None) -> World:
    return World()


def send(client: Any, method: str, path: str, *, api: bool) -> Any:
    call = getattr(client, method.lower())
    if method == "GET":
        return call(path)
    if api:
        return call(path, {}, format="json")
    return call(path, {})


# -- the matrix ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("surface", "route", "method"), cases(), ids=lambda v: v or "root")
def test_each_role_gets_exactly_what_the_matrix_allows(
    world: World, surface: str, route: str, method: str
) -> None:
    needed = (API if surface == "api" else PAGES)[route][method]
    path = world.path(route)
    for caller in ("anonymous", "norole", "viewer", "operator", "admin"):
        client = world.api(caller) if surface == "api" else world.browser(caller)
        response = send(client, method, path, api=surface == "api")
        where = f"{method} {path} as {caller} (needs {needed}): {response.status_code}"
        assert response.status_code < 500, where
        if CALLER_RANK[caller] >= RANK[needed]:
            assert response.status_code not in (401, 403), where
            if needed != PUBLIC and response.status_code in (301, 302):
                assert not response["Location"].startswith("/accounts/login/"), where
        elif caller == "anonymous":
            if surface == "api":
                assert response.status_code == 401, where
                body = response.json()
                assert body["code"] == "not_authenticated" and body["detail"], where
            else:
                assert response.status_code == 302, where
                assert response["Location"].startswith("/accounts/login/?next="), where
        else:
            assert response.status_code == 403, where
            if surface == "api":
                assert response.json()["code"] == "permission_denied", where


# -- the admin site -------------------------------------------------------------------------------


def admin_site_paths() -> list[str]:
    paths = ["/admin/"]
    for model in admin_site.site._registry:
        meta = model._meta
        paths += [f"/admin/{meta.app_label}/", f"/admin/{meta.app_label}/{meta.model_name}/"]
    return sorted(set(paths))


def test_the_admin_site_is_for_the_admin_role_only(world: World) -> None:
    routes = [r for r in project_routes() if r.startswith(ADMIN_SITE_PREFIX)]
    assert routes, "the admin site is mounted"
    for path in admin_site_paths():
        for caller in ("anonymous", "norole", "viewer", "operator"):
            response = world.browser(caller).get(path)
            assert response.status_code == 302, f"{path} as {caller}: {response.status_code}"
            assert response["Location"].startswith("/admin/login/"), f"{path} as {caller}"
        assert world.browser("admin").get(path).status_code == 200, path


# -- ownership: cancel and steer ------------------------------------------------------------------


def test_a_user_may_cancel_or_steer_only_runs_they_started_unless_admin(world: World) -> None:
    other, _, other_token = user_create_or_update(username="other-operator", role=OPERATOR)
    run_id = world.root.pk
    foreign = APIClient()
    foreign.credentials(HTTP_AUTHORIZATION=f"Token {other_token}")
    steer = foreign.post(f"/api/v1/runs/{run_id}/steer/", {"message": "stop"}, format="json")
    assert steer.status_code == 403
    assert steer.json() == {
        "detail": "Only the run's creator or an admin may steer it.",
        "code": "permission_denied",
    }
    cancel = foreign.post(f"/api/v1/runs/{run_id}/cancel/")
    assert cancel.status_code == 403
    assert cancel.json() == {
        "detail": "Only the run's creator or an admin may cancel it.",
        "code": "permission_denied",
    }
    page = Client()
    page.force_login(other)  # type: ignore[arg-type]  # the stubs expect auth.User itself
    assert page.post(f"/runs/{run_id}/steer/", {"message": "stop"}).status_code == 403
    assert page.post(f"/runs/{run_id}/cancel/").status_code == 403
    assert Run.objects.get(pk=run_id).status == Run.Status.WAITING
    # The creator may; so may an admin.
    assert (
        world.api("operator")
        .post(f"/api/v1/runs/{run_id}/steer/", {"message": "go on"}, format="json")
        .status_code
        == 202
    )
    assert (
        world.api("admin")
        .post(f"/api/v1/runs/{run_id}/steer/", {"message": "hurry"}, format="json")
        .status_code
        == 202
    )
    assert world.api("admin").post(f"/api/v1/runs/{run_id}/cancel/").status_code == 200
    assert Run.objects.get(pk=run_id).status == Run.Status.CANCELLED


# -- CSRF on session-authenticated requests ----------------------------------------------------------


def test_session_authenticated_posts_need_a_csrf_token(world: World) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(world.users["operator"])
    api = client.post(f"/api/v1/runs/{world.root.pk}/cancel/")
    assert api.status_code == 403
    assert "CSRF" in api.json()["detail"]
    page = client.post(f"/runs/{world.root.pk}/cancel/", {"confirm": "yes"})
    assert page.status_code == 403
    assert Run.objects.get(pk=world.root.pk).status == Run.Status.WAITING
    # A token is not a session: no CSRF token is needed (or possible) with one.
    token = APIClient(enforce_csrf_checks=True)
    token.credentials(HTTP_AUTHORIZATION=f"Token {world.tokens['operator']}")
    assert token.post(f"/api/v1/runs/{world.root.pk}/cancel/").status_code == 200


# -- the websocket -------------------------------------------------------------------------------


def _ws_session(username: str, role: str | None) -> bytes:
    if role is None:
        user: Any = get_user_model().objects.create_user(username=username, password="pw-12345678")
    else:
        user, _, _ = user_create_or_update(username=username, role=role)
    client = Client()
    client.force_login(user)
    return f"sessionid={client.cookies['sessionid'].value}".encode()


async def _ws_connect(
    root_id: Any, cookie: bytes | None, origin: bytes = b"http://testserver", path: str = ""
) -> Any:
    headers = [(b"origin", origin)] + ([(b"cookie", cookie)] if cookie else [])
    comm = WebsocketCommunicator(application, path or f"/ws/runs/{root_id}/", headers=headers)
    result = await comm.connect()
    if result[0] and not await comm.receive_nothing(timeout=0.3):
        # A refusal is sent as a close code once the socket is open (a browser sees it then).
        message = await comm.receive_output()
        if message["type"] == "websocket.close":
            result = (False, message.get("code"))
    await comm.disconnect()
    return result


@pytest.mark.django_db(transaction=True)
async def test_the_run_websocket_follows_the_matrix() -> None:
    def setup() -> tuple[Any, dict[str, bytes | None]]:
        load_config()
        root = Runs().root
        cookies: dict[str, bytes | None] = {"anonymous": None, "norole": _ws_session("nora", None)}
        for role in (VIEWER, OPERATOR, ADMIN):
            cookies[role] = _ws_session(f"{role}-ws", role)
        return root.pk, cookies

    root_id, cookies = await database_sync_to_async(setup)()
    assert await _ws_connect(root_id, cookies["anonymous"]) == (False, 4401)
    assert await _ws_connect(root_id, cookies["norole"]) == (False, 4403)
    for role in (VIEWER, OPERATOR, ADMIN):
        connected, _ = await _ws_connect(root_id, cookies[role])
        assert connected, role
    # Cross-site websocket hijacking: a page on another origin rides the victim's cookie.
    connected, _ = await _ws_connect(root_id, cookies[ADMIN], origin=b"http://evil.example")
    assert not connected
    # The dashboard's notices: the same matrix.
    assert await _ws_connect(root_id, cookies["anonymous"], path="/ws/live/") == (False, 4401)
    assert await _ws_connect(root_id, cookies["norole"], path="/ws/live/") == (False, 4403)
    for role in (VIEWER, OPERATOR, ADMIN):
        connected, _ = await _ws_connect(root_id, cookies[role], path="/ws/live/")
        assert connected, role
    connected, _ = await _ws_connect(root_id, cookies[ADMIN], origin=b"http://evil.example", path="/ws/live/")
    assert not connected
    # Any other path is no socket, for everyone.
    assert await _ws_connect(root_id, cookies[ADMIN], path="/ws/nothing/") == (False, 4404)
