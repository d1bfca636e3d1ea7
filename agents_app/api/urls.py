from django.http import HttpRequest, JsonResponse
from django.urls import URLPattern, URLResolver, include, path, re_path
from django.views.decorators.csrf import csrf_exempt

from agents_app.api import config_views as cv
from agents_app.api import policy_views as pv

urlpatterns: list[URLPattern | URLResolver] = []
for prefix, kind in (
    ("agents", "agents"),
    ("risk-profiles", "risk_profiles"),
    ("runtime-profiles", "runtime_profiles"),
    ("providers", "providers"),
    ("mcp/servers", "mcp_servers"),
    ("mcp/bundles", "mcp_bundles"),
):
    name = kind.replace("_", "-")
    urlpatterns += [
        path(f"{prefix}/", cv.ConfigListApi.as_view(kind=kind), name=f"{name}-list"),
        path(f"{prefix}/<str:key>/", cv.ConfigDetailApi.as_view(kind=kind), name=f"{name}-detail"),
    ]

urlpatterns += [
    path("agents/<str:key>/roster/", pv.AgentRosterApi.as_view(), name="agent-roster"),
    path("agents/<str:key>/tools/", pv.AgentToolsApi.as_view(), name="agent-tools"),
    path("agents/<str:key>/mcp-servers/", cv.AgentMcpServersApi.as_view(), name="agent-mcp-servers"),
    path("policy/check/", pv.PolicyCheckApi.as_view(), name="policy-check"),
    path("mcp/", cv.McpSettingsApi.as_view(), name="mcp-settings"),
    path("mcp/import/", cv.McpImportApi.as_view(), name="mcp-import"),
    path("config/", cv.ConfigApi.as_view(), name="config"),
    path("config/revisions/", cv.ConfigRevisionListApi.as_view(), name="config-revisions"),
    path("config/revisions/<int:pk>/", cv.ConfigRevisionDetailApi.as_view(), name="config-revision"),
    path(
        "config/revisions/<int:pk>/restore/",
        cv.ConfigRevisionRestoreApi.as_view(),
        name="config-revision-restore",
    ),
    path("", include("runs_app.api.urls")),
]


@csrf_exempt  # a POST to no endpoint is a 404, not a CSRF failure page
def api_not_found(request: HttpRequest) -> JsonResponse:
    """Any other URL under /api/v1/ (an id a converter did not match, a typo): the API's JSON
    404, not the HTML page of an unmatched URL."""
    return JsonResponse({"detail": f"No API endpoint at {request.path}", "code": "not_found"}, status=404)


urlpatterns.append(re_path(r"^.*$", api_not_found, name="api-not-found"))
