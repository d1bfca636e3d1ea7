from django.urls import URLPattern, URLResolver, include, path

from agents_app.api import config_views as cv
from agents_app.api import policy_views as pv

urlpatterns: list[URLPattern | URLResolver] = []
for prefix, kind in (
    ("agents", "agents"),
    ("risk-profiles", "risk_profiles"),
    ("runtime-profiles", "runtime_profiles"),
    ("providers", "providers"),
):
    name = kind.replace("_", "-")
    urlpatterns += [
        path(f"{prefix}/", cv.ConfigListApi.as_view(kind=kind), name=f"{name}-list"),
        path(f"{prefix}/<str:key>/", cv.ConfigDetailApi.as_view(kind=kind), name=f"{name}-detail"),
    ]

urlpatterns += [
    path("agents/<str:alias>/roster/", pv.AgentRosterApi.as_view(), name="agent-roster"),
    path("agents/<str:alias>/tools/", pv.AgentToolsApi.as_view(), name="agent-tools"),
    path("policy/check/", pv.PolicyCheckApi.as_view(), name="policy-check"),
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
