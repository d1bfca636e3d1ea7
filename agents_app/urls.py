from django.urls import URLPattern, URLResolver, path

from agents_app import views

urlpatterns: list[URLPattern | URLResolver] = [
    path("delegation-map/", views.delegation_map, name="delegation-map"),
    path("delegation-map/simulate/", views.simulate, name="delegation-simulate"),
    path("config/", views.config_page, name="config-page"),
    path("config/import/preview/", views.config_import_preview, name="config-import-preview"),
    path("config/import/", views.config_import, name="config-import"),
    path("config/revisions/<int:pk>/", views.config_revision, name="config-revision-page"),
    path(
        "config/revisions/<int:pk>/restore/",
        views.config_revision_restore_view,
        name="config-revision-restore",
    ),
]
urlpatterns += [
    path("mcp/", views.mcp_page, name="mcp-page"),
    path("mcp/settings/", views.mcp_settings_view, name="mcp-settings-page"),
    path("mcp/import/preview/", views.mcp_import_preview, name="mcp-import-preview"),
    path("mcp/import/", views.mcp_import, name="mcp-import-page"),
    # Servers and bundles are listed on the MCP page itself.
    path("mcp/servers/", views.mcp_page, name="mcp-servers-page"),
    path("mcp/bundles/", views.mcp_page, name="mcp-bundles-page"),
]
for url, kind in (
    ("agents", "agents"),
    ("risk-profiles", "risk_profiles"),
    ("runtime-profiles", "runtime_profiles"),
    ("providers", "providers"),
    ("mcp/servers", "mcp_servers"),
    ("mcp/bundles", "mcp_bundles"),
):
    if not url.startswith("mcp/"):  # the MCP editors have no live preview
        urlpatterns += [
            path(f"{url}/", views.entry_list, {"kind_name": kind}, name=f"{url}-page"),
            path(f"{url}/preview/", views.entry_preview, {"kind_name": kind}),
            path(f"{url}/<str:key>/preview/", views.entry_preview, {"kind_name": kind}),
        ]
    urlpatterns += [
        path(f"{url}/new/", views.entry_edit, {"kind_name": kind}, name=f"{url}-new"),
        path(f"{url}/<str:key>/", views.entry_edit, {"kind_name": kind}, name=f"{url}-edit"),
        path(f"{url}/<str:key>/delete/", views.entry_delete_view, {"kind_name": kind}, name=f"{url}-delete"),
    ]
