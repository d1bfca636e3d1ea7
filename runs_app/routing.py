from django.urls import URLPattern, path

from runs_app.consumers import RunTreeConsumer

websocket_urlpatterns: list[URLPattern] = [
    path("ws/runs/<uuid:root_id>/", RunTreeConsumer.as_asgi(), name="ws-run-tree"),
]
