from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView

from zeroclaw_site.views import favicon

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
    # Our page around the sidecar's Redoc: the package's own loads web fonts from the internet.
    path(
        "api/redoc/",
        SpectacularRedocView.as_view(url_name="schema", template_name="api/redoc.html"),
        name="api-redoc",
    ),
    path("favicon.ico", favicon, name="favicon"),
    path("api/v1/", include("agents_app.api.urls")),
    path("", include("agents_app.urls")),
    path("", include("runs_app.urls")),
]
