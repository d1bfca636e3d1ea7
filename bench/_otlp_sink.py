"""A minimal OTLP/HTTP receiver for benchmarks: accepts `POST /v1/traces` (protobuf), decodes
each `ExportTraceServiceRequest` with the OpenTelemetry protocol's own classes, and counts the
spans (all, and distinct (trace id, span id) pairs: a span id is unique within its trace). `GET /count` answers `{"spans": n, "distinct": m}`.

Usage: python bench/_otlp_sink.py PORT"""

from __future__ import annotations

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

seen: set[tuple[bytes, bytes]] = set()
total = 0
lock = threading.Lock()


class Sink(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        global total
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        ids = [
            (s.trace_id, s.span_id)
            for rs in request.resource_spans
            for ss in rs.scope_spans
            for s in ss.spans
        ]
        with lock:
            total += len(ids)
            seen.update(ids)
        answer = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def do_GET(self) -> None:  # noqa: N802
        with lock:
            body = json.dumps({"spans": total, "distinct": len(seen)}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


if __name__ == "__main__":
    ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Sink).serve_forever()
