"""daphne's Server with ASGI's websocket denial response (the `websocket.http.response`
extension), so that a websocket the application refuses before accepting it is answered
with the application's HTTP status (404 for a path that names no socket) instead of daphne's
fixed 403. daphne 4 does not offer the extension; this adds it without changing anything else.

Import it only where daphne may install Twisted's reactor (`manage.py serve`)."""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

from autobahn.websocket.types import ConnectionDeny
from daphne.server import Server
from daphne.ws_protocol import WebSocketProtocol

EXTENSION = "websocket.http.response"
START = "websocket.http.response.start"
BODY = "websocket.http.response.body"


class DenialServer(Server):  # type: ignore[misc]  # daphne has no type hints
    def create_application(self, protocol: Any, scope: dict[str, Any]) -> Any:
        if scope.get("type") == "websocket":
            scope.setdefault("extensions", {})[EXTENSION] = {}
        return super().create_application(protocol, scope)

    async def handle_reply(self, protocol: Any, message: dict[str, Any]) -> None:
        kind = message.get("type")
        if kind not in (START, BODY) or not isinstance(protocol, WebSocketProtocol):
            await super().handle_reply(protocol, message)
            return
        connection = self.connections.get(protocol)
        if (
            connection is None
            or connection.get("disconnected")
            or not hasattr(protocol, "handshake_deferred")
        ):
            return  # gone, or already accepted: a denial is only for a handshake under way
        if kind == START:
            connection["denial_status"] = int(message.get("status", 403))
            return
        if message.get("more_body"):
            return
        status = connection.pop("denial_status", 403)
        try:
            reason = HTTPStatus(status).phrase
        except ValueError:
            reason = "Refused"
        deferred = protocol.handshake_deferred
        del protocol.handshake_deferred
        deferred.errback(ConnectionDeny(code=status, reason=reason))
        self.protocol_disconnected(protocol)
