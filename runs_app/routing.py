from django.urls import URLPattern, path, re_path

from runs_app.consumers import LiveConsumer, NoSuchSocket, RunTreeConsumer

websocket_urlpatterns: list[URLPattern] = [
    path("ws/runs/<uuid:root_id>/", RunTreeConsumer.as_asgi(), name="ws-run-tree"),
    path("ws/live/", LiveConsumer.as_asgi(), name="ws-live"),
    # Last: any other path is a 404, never the router's "No route found" (a 500).
    re_path(r"", NoSuchSocket.as_asgi(), name="ws-not-found"),
]
