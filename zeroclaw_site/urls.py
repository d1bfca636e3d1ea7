from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView

from zeroclaw_site.views import favicon, same_site_only

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", same_site_only(SpectacularSwaggerView.as_view(url_name="schema")), name="api-docs"),
    # Our page around the sidecar's Redoc: the package's own loads web fonts from the internet.
    path(
        "api/redoc/",
        same_site_only(SpectacularRedocView.as_view(url_name="schema", template_name="api/redoc.html")),
        name="api-redoc",
    ),
    path("favicon.ico", favicon, name="favicon"),
    path("api/v1/", include("agents_app.api.urls")),
    path("", include("agents_app.urls")),
    path("", include("runs_app.urls")),
]

handler400 = "zeroclaw_site.views.bad_request"
handler403 = "zeroclaw_site.views.permission_denied"
handler404 = "zeroclaw_site.views.page_not_found"
handler500 = "zeroclaw_site.views.server_error"
