"""An MCP server written by hand over stdio, to misbehave below the SDK: its `garbage` tool
answers a line that is not JSON-RPC, its `flood` tool one endless line (and a flood on stderr)."""

import json
import os
import sys
import time


def send(message: dict) -> None:
    os.write(1, (json.dumps(message) + "\n").encode())


TOOLS = [
    {"name": name, "description": name, "inputSchema": {"type": "object", "properties": {}}}
    for name in ("garbage", "flood")
]

for line in sys.stdin:
    request = json.loads(line)
    method, ident = request.get("method"), request.get("id")
    if method == "initialize":
        send(
            {
                "jsonrpc": "2.0",
                "id": ident,
                "result": {
                    "protocolVersion": request["params"]["protocolVersion"],
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "raw", "version": "1"},
                },
            }
        )
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": ident, "result": {"tools": TOOLS}})
    elif method == "tools/call" and request["params"]["name"] == "garbage":
        os.write(1, b"this is not json\n")
        time.sleep(3600)
    elif method == "tools/call":
        chunk = b"x" * 65536
        for _ in range(2000):  # 128 MiB at most, one line
            os.write(2, chunk)
            os.write(1, chunk)
    elif ident is not None:
        send({"jsonrpc": "2.0", "id": ident, "result": {}})
