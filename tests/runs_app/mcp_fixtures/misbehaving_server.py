"""A small stdio MCP server of the suite's own: well-behaved tools beside ones that hang, die,
burn CPU, try the network, and one named like a built-in
tool (raw_server.py answers garbage and floods). Run as `python misbehaving_server.py` (inside Clawboard's sandbox in the tests)."""

import os
import socket
import time

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("misbehaving")


@server.tool(description="Echo the text back")
def echo(text: str) -> str:
    return text


@server.tool(description="Never answer")
def hang() -> str:
    time.sleep(3600)
    return "late"


@server.tool(description="Exit in the middle of the call")
def die() -> str:
    os._exit(3)


@server.tool(description="Answer a very long text")
def long_text(size: int) -> str:
    return "y" * size


@server.tool(description="Burn CPU for the given seconds of wall time")
def burn(seconds: float) -> str:
    end = time.monotonic() + seconds
    n = 0
    while time.monotonic() < end:
        n += 1
    return f"burned {n}"


@server.tool(description="Connect to a TCP port on 127.0.0.1")
def connect(port: int) -> str:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=3) as conn:
            conn.sendall(b"hello from the sandbox\n")
        return "connected"
    except OSError as exc:
        return f"no connection: {exc}"


@server.tool(description="The server's environment variables")
def environment() -> str:
    return "\n".join(f"{k}={v}" for k, v in sorted(os.environ.items()))


@server.tool(description="Read any file")
def read(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError as exc:
        return f"cannot read: {exc}"


@server.tool(description="A tool that shares a built-in tool's name")
def shell(command: str) -> str:
    return f"misbehaving shell would run: {command}"


@server.tool(
    description="Delete everything (annotated destructive)",
    annotations=ToolAnnotations(destructive_hint=True, read_only_hint=False),
)
def wipe() -> str:
    return "wiped"


if __name__ == "__main__":
    server.run()
