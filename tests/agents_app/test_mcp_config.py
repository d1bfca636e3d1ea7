"""MCP servers as configuration: TOML import/export, validation, secrets, launchers, the
mcpServers JSON import and REST."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from rest_framework.test import APIClient

from agents_app import secrets
from agents_app.config_io import export_toml, parse_toml
from agents_app.models import ConfigRevision, McpServer
from agents_app.selectors import config_snapshot_get
from tests.agents_app.support import BASE_TOML, config_state

V1 = "/api/v1"
FIXTURE = Path(__file__).parent / "fixtures" / "zeroclaw_mcp.toml"
FS_PACKAGE = "@modelcontextprotocol/server-filesystem"


@pytest.fixture
def mcp_dir(tmp_path: Path, settings: Any) -> Path:
    """An MCP install directory with the filesystem server (npm) and the time server (PyPI)
    installed as fake executables, as the project's install target lays them out."""
    root = tmp_path / "mcp"
    package = root / "node_modules" / FS_PACKAGE
    package.mkdir(parents=True)
    (package / "package.json").write_text(
        json.dumps({"name": FS_PACKAGE, "bin": {"mcp-server-filesystem": "dist/index.js"}})
    )
    for executable in (
        root / "node_modules" / ".bin" / "mcp-server-filesystem",
        root / "venv" / "bin" / "mcp-server-time",
    ):
        executable.parent.mkdir(parents=True, exist_ok=True)
        executable.write_text("#!/bin/sh\nexit 0\n")
        executable.chmod(0o755)
    settings.MCP_SERVERS_DIR = root
    return root


def post_toml(client: APIClient, text: str, query: str = "") -> Any:
    return client.post(f"{V1}/config/{query}", data=text, content_type="application/toml")


def post_json_import(client: APIClient, body: Any, query: str = "") -> Any:
    return client.post(f"{V1}/mcp/import/{query}", data=json.dumps(body), content_type="application/json")


def errors_of(*pairs: tuple[str, str]) -> dict[str, Any]:
    return {"errors": [{"field": f, "message": m} for f, m in pairs]}


def mcp_sections(text: str) -> dict[str, Any]:
    doc = tomllib.loads(text)
    return {
        "mcp": doc.get("mcp"),
        "mcp_bundles": doc.get("mcp_bundles"),
        "agents": {a: entry.get("mcp_bundles", []) for a, entry in doc.get("agents", {}).items()},
    }


SERVER_DEFAULTS: dict[str, Any] = {
    "transport": "stdio",
    "command": "",
    "args": [],
    "env": {},
    "url": "",
    "headers": {},
}


# --- TOML import and export -----------------------------------------------------------------------


def test_a_zeroclaw_config_with_mcp_servers_imports_whole_and_exports_back_equal(
    admin_api: APIClient, mcp_dir: Path
) -> None:
    response = post_toml(admin_api, FIXTURE.read_text())
    assert response.status_code == 200, response.json()
    warnings = response.json()["warnings"]
    assert (
        'mcp.servers.filesystem.command: "npx -y @modelcontextprotocol/server-filesystem" downloads the '
        f'server when it starts; read as the installed "{mcp_dir}/node_modules/.bin/mcp-server-filesystem"'
    ) in warnings
    assert (
        'mcp.servers.time.command: "uvx mcp-server-time" downloads the server when it starts; '
        f'read as the installed "{mcp_dir}/venv/bin/mcp-server-time"'
    ) in warnings
    assert (
        "mcp.servers.github.headers.Authorization is encrypted with ZeroClaw's secret store and cannot be "
        'read; enter it again (the value itself, or "${VAR}" to read it from an environment variable)'
    ) in warnings
    assert 'skipped unknown field "mcp.servers.time.pinned_resources"' in warnings

    exported = admin_api.get(f"{V1}/config/?format=toml").content.decode()
    original = mcp_sections(FIXTURE.read_text())
    expected_servers = []
    for server in original["mcp"]["servers"]:
        server = {**SERVER_DEFAULTS, **server}
        server.pop("pinned_resources", None)
        server["env"] = {k: v if v.startswith("${") else "********" for k, v in server["env"].items()}
        server["headers"] = {k: v if v.startswith("${") else "********" for k, v in server["headers"].items()}
        expected_servers.append(server)
    expected_servers[0]["command"] = f"{mcp_dir}/node_modules/.bin/mcp-server-filesystem"
    expected_servers[0]["args"] = ["/srv/projects"]
    expected_servers[2]["command"] = f"{mcp_dir}/venv/bin/mcp-server-time"
    expected_servers[2]["args"] = ["--local-timezone=Europe/Paris"]
    again = mcp_sections(exported)
    assert again["mcp"] == {"enabled": True, "deferred_loading": True, "servers": expected_servers}
    assert again["mcp_bundles"] == original["mcp_bundles"] | {
        "files": {"servers": ["filesystem", "time"], "exclude": []}
    }
    assert {a: again["agents"][a] for a in original["agents"]} == original["agents"]
    # The export reads back as the same configuration (masks stand for the stored values).
    assert post_toml(admin_api, exported).json()["changes"] == []


def test_an_agent_gets_the_servers_of_its_bundles_only(admin_api: APIClient, mcp_dir: Path) -> None:
    assert post_toml(admin_api, FIXTURE.read_text()).status_code == 200
    snap = config_snapshot_get()

    def granted(alias: str) -> list[str]:
        return [s.name for s in snap.mcp_servers_of(snap.agents[alias])]

    assert granted("assistant") == ["filesystem", "time", "github"]
    assert granted("reviewer") == ["github", "filesystem"]
    assert granted("plain") == []
    rows = admin_api.get(f"{V1}/agents/reviewer/mcp-servers/").json()
    assert rows == [
        {"server": "github", "bundle": "code", "granted": True, "reason": "", "transport": "http"},
        {"server": "filesystem", "bundle": "code", "granted": True, "reason": "", "transport": "stdio"},
        {
            "server": "tracker",
            "bundle": "code",
            "granted": False,
            "reason": "excluded by mcp_bundles.code.exclude",
            "transport": "sse",
        },
    ]
    assert admin_api.get(f"{V1}/agents/plain/mcp-servers/").json() == []


def test_mcp_tool_names_of_configured_servers_stay_in_tool_lists(admin_api: APIClient, mcp_dir: Path) -> None:
    assert post_toml(admin_api, FIXTURE.read_text()).status_code == 200
    risk = config_snapshot_get().risk_profiles["dev"]
    assert risk.excluded_tools == ("github__delete_repository",)
    assert risk.always_ask == ("filesystem__write_file",)


def test_secrets_are_encrypted_at_rest_and_masked_everywhere(admin_api: APIClient, mcp_dir: Path) -> None:
    text = FIXTURE.read_text().replace(
        'env = { TZ_FALLBACK = "UTC" }', 'env = { TIME_TOKEN = "tok-5f2e9c71" }'
    )
    assert post_toml(admin_api, text).status_code == 200
    with connection.cursor() as cursor:
        cursor.execute("SELECT env, headers FROM agents_app_mcpserver WHERE name = %s", ["time"])
        raw_env, raw_headers = cursor.fetchone()
        cursor.execute("SELECT headers FROM agents_app_mcpserver WHERE name = %s", ["tracker"])
        (tracker_headers,) = cursor.fetchone()
    assert "tok-5f2e9c71" not in raw_env
    token = json.loads(raw_env)["TIME_TOKEN"]["token"]
    assert secrets.decrypt(token) == "tok-5f2e9c71"
    assert json.loads(raw_headers) == {}
    assert json.loads(tracker_headers) == {"X-Api-Key": {"env": "TRACKER_KEY"}}

    shown = admin_api.get(f"{V1}/mcp/servers/time/").json()
    assert shown["env"] == {"TIME_TOKEN": "********"}
    assert admin_api.get(f"{V1}/mcp/servers/tracker/").json()["headers"] == {"X-Api-Key": "${TRACKER_KEY}"}
    assert admin_api.get(f"{V1}/mcp/servers/github/").json()["missing_secrets"] == ["headers.Authorization"]
    everything = [
        admin_api.get(f"{V1}/config/?format=toml").content.decode(),
        json.dumps(admin_api.get(f"{V1}/config/").json()),
        *(r.toml + r.diff for r in ConfigRevision.objects.all()),
    ]
    assert all("tok-5f2e9c71" not in text for text in everything)
    assert 'env = { TIME_TOKEN = "********" }' in everything[0]


def test_the_plain_value_is_read_only_from_the_token_or_the_named_variable(
    admin_api: APIClient, mcp_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert post_toml(admin_api, FIXTURE.read_text()).status_code == 200
    snap = config_snapshot_get()
    monkeypatch.setenv("TRACKER_KEY", "from-the-environment")
    assert (
        secrets.mcp_secret_plain(snap.mcp_servers["tracker"].headers["X-Api-Key"]) == "from-the-environment"
    )
    assert secrets.mcp_secret_plain(snap.mcp_servers["time"].env["TZ_FALLBACK"]) == "UTC"
    assert secrets.mcp_secret_plain(snap.mcp_servers["github"].headers["Authorization"]) is None


def test_a_masked_value_in_a_fresh_configuration_is_refused_naming_the_field(admin_api: APIClient) -> None:
    text = (
        BASE_TOML
        + '\n[[mcp.servers]]\nname = "api"\ntransport = "http"\nurl = "https://x.example/mcp"\nheaders = { Authorization = "********" }\n'
    )
    response = post_toml(admin_api, text)
    assert response.status_code == 400
    path = "mcp.servers.api.headers.Authorization"
    assert response.json() == errors_of(
        (
            path,
            f'{path} = "********" stands for the stored value, but none is stored for it; give the value '
            'itself, or "${VAR}" to read it from an environment variable',
        )
    )


# --- validation -----------------------------------------------------------------------------------

_MCP_ERRORS: list[tuple[str, str, str]] = [
    (
        '[[mcp.servers]]\nname = "fs"\ncommand = "/bin/true"\ntool_timeout_secs = 0\n',
        "mcp.servers.fs.tool_timeout_secs",
        "mcp.servers.fs.tool_timeout_secs must be between 1 and 600 (got 0)",
    ),
    (
        '[[mcp.servers]]\nname = "fs"\ncommand = "/bin/true"\ntool_timeout_secs = 601\n',
        "mcp.servers.fs.tool_timeout_secs",
        "mcp.servers.fs.tool_timeout_secs must be between 1 and 600 (got 601)",
    ),
    (
        '[[mcp.servers]]\nname = "fs"\n',
        "mcp.servers.fs.command",
        "mcp.servers.fs.command is empty; a stdio server needs a command",
    ),
    (
        '[[mcp.servers]]\nname = "remote"\ntransport = "http"\n',
        "mcp.servers.remote.url",
        "mcp.servers.remote.url is empty; an http server needs an http(s) URL",
    ),
    (
        '[[mcp.servers]]\nname = "remote"\ntransport = "sse"\nurl = "ftp://files.example/sse"\n',
        "mcp.servers.remote.url",
        'mcp.servers.remote.url = "ftp://files.example/sse" is not an http(s) URL',
    ),
    (
        '[[mcp.servers]]\nname = "remote"\ntransport = "websocket"\nurl = "https://x.example"\n',
        "mcp.servers.remote.transport",
        'mcp.servers.remote.transport = "websocket" is not a valid transport; expected one of stdio, http, sse',
    ),
    (
        '[[mcp.servers]]\nname = "my__fs"\ncommand = "/bin/true"\n',
        "mcp.servers.my__fs.name",
        'mcp.servers.my__fs.name = "my__fs" contains "__", which no MCP name may contain (it separates '
        "server and tool in <server>__<tool>)",
    ),
    (
        '[[mcp.servers]]\nname = "my fs"\ncommand = "/bin/true"\n',
        "mcp.servers.my fs.name",
        'mcp.servers.my fs.name = "my fs" is invalid; expected [A-Za-z0-9_-]{1,64}',
    ),
    (
        '[[mcp.servers]]\nname = "fs"\ncommand = "/bin/true"\n[[mcp.servers]]\nname = "FS"\ncommand = "/bin/true"\n',
        "mcp.servers.FS.name",
        'mcp.servers.FS.name = "FS" duplicates "fs"; MCP server names must be unique ignoring case',
    ),
    (
        '[[mcp.servers]]\nname = "fs"\ncommand = "/bin/true"\n[[mcp.servers]]\nname = "fs"\ncommand = "/bin/false"\n',
        "mcp.servers[1].name",
        'mcp.servers[1].name = "fs" duplicates mcp.servers[0].name; MCP server names must be unique ignoring case',
    ),
    (
        '[[mcp.servers]]\nname = ""\ncommand = "/bin/true"\n',
        "mcp.servers[0].name",
        "mcp.servers[0].name is empty; every MCP server needs a name",
    ),
    (
        '[[mcp.servers]]\nname = "fs"\ncommand = "/bin/true"\nenv = { "BAD-NAME" = "x" }\n',
        "mcp.servers.fs.env.BAD-NAME",
        "mcp.servers.fs.env.BAD-NAME is invalid (BAD-NAME); expected [A-Za-z_][A-Za-z0-9_]*",
    ),
    (
        '[[mcp.servers]]\nname = "r"\ntransport = "http"\nurl = "https://x.example"\nheaders = { "Bad Header" = "x" }\n',
        "mcp.servers.r.headers.Bad Header",
        "mcp.servers.r.headers.Bad Header is not a valid HTTP header name",
    ),
    (
        '[mcp_bundles.b]\nservers = ["ghost"]\n',
        "mcp_bundles.b.servers[0]",
        'mcp_bundles.b.servers[0] = "ghost" but mcp.servers has no server named "ghost"',
    ),
    (
        '[[mcp.servers]]\nname = "fs"\ncommand = "/bin/true"\n[mcp_bundles.b]\nservers = ["fs", "FS"]\n',
        "mcp_bundles.b.servers[1]",
        'mcp_bundles.b.servers[1] = "FS" duplicates an earlier entry (names are compared ignoring case)',
    ),
    (
        '[mcp_bundles.b]\nexclude = ["__none__"]\n',
        "mcp_bundles.b.exclude[0]",
        'mcp_bundles.b.exclude[0] = "__none__" contains "__", which no MCP name may contain (it separates '
        "server and tool in <server>__<tool>)",
    ),
    (
        '[mcp_bundles.b]\nservers = [""]\n',
        "mcp_bundles.b.servers[0]",
        "mcp_bundles.b.servers[0] is empty; remove it or name a configured MCP server",
    ),
    (
        "[mcp_bundles.a__b]\nservers = []\n",
        "mcp_bundles.a__b",
        'mcp_bundles.a__b = "a__b" contains "__", which no MCP name may contain (it separates server and '
        "tool in <server>__<tool>)",
    ),
]


@pytest.mark.parametrize(("snippet", "field", "message"), _MCP_ERRORS)
def test_each_mcp_error_names_its_field(admin_api: APIClient, snippet: str, field: str, message: str) -> None:
    before = config_state()
    response = post_toml(admin_api, BASE_TOML + "\n" + snippet)
    assert response.status_code == 400
    assert response.json() == errors_of((field, message))
    assert config_state() == before


def test_an_agent_naming_an_unknown_or_repeated_bundle_is_refused(admin_api: APIClient) -> None:
    text = (
        BASE_TOML.replace("[agents.beta]\n", '[agents.beta]\nmcp_bundles = ["tools", "ghost", "Tools", ""]\n')
        + "\n[mcp_bundles.tools]\nservers = []\n"
    )
    response = post_toml(admin_api, text)
    assert response.status_code == 400
    assert response.json() == errors_of(
        (
            "agents.beta.mcp_bundles[1]",
            'agents.beta.mcp_bundles[1] = "ghost" but mcp_bundles.ghost is not configured',
        ),
        (
            "agents.beta.mcp_bundles[2]",
            'agents.beta.mcp_bundles[2] = "Tools" duplicates an earlier entry (names are compared ignoring case)',
        ),
        (
            "agents.beta.mcp_bundles[3]",
            "agents.beta.mcp_bundles[3] is empty; remove it or name a configured MCP bundle",
        ),
    )


def test_every_error_comes_in_one_round(admin_api: APIClient) -> None:
    snippet = (
        '[[mcp.servers]]\nname = "fs"\ntool_timeout_secs = 900\n'
        '[[mcp.servers]]\nname = "web"\ntransport = "http"\n'
        '[mcp_bundles.b]\nservers = ["nope"]\n'
    )
    response = post_toml(admin_api, BASE_TOML + "\n" + snippet)
    assert [e["field"] for e in response.json()["errors"]] == [
        "mcp.servers.fs.command",
        "mcp.servers.fs.tool_timeout_secs",
        "mcp.servers.web.url",
        "mcp_bundles.b.servers[0]",
    ]


def test_an_mcp_tool_of_an_unknown_server_is_refused_in_a_tool_list(
    admin_api: APIClient, base_config: None
) -> None:
    response = admin_api.patch(
        f"{V1}/risk-profiles/team/", {"excluded_tools": ["githb__delete_repository"]}, format="json"
    )
    assert response.status_code == 400
    assert response.json() == errors_of(
        (
            "risk_profiles.team.excluded_tools",
            'unknown MCP server "githb" in excluded_tools entry "githb__delete_repository"; MCP tools are '
            "named <server>__<tool> after a configured [[mcp.servers]] entry",
        )
    )


# --- launchers ------------------------------------------------------------------------------------


def test_a_launcher_that_is_not_installed_is_refused_with_how_to_install_it(
    admin_api: APIClient, mcp_dir: Path
) -> None:
    snippet = '[[mcp.servers]]\nname = "acme"\ncommand = "npx"\nargs = ["-y", "@acme/mcp-not-installed@1.2.0", "--flag"]\n'
    response = post_toml(admin_api, BASE_TOML + "\n" + snippet)
    assert response.status_code == 400
    assert response.json() == errors_of(
        (
            "mcp.servers.acme.command",
            'mcp.servers.acme.command: "npx -y @acme/mcp-not-installed@1.2.0" downloads the server when it '
            f"starts, and MCP servers run without network; install it first (npm install --prefix {mcp_dir} "
            "@acme/mcp-not-installed) and save again",
        )
    )


def test_a_pypi_launcher_that_is_not_installed_says_how_to_install_it(
    admin_api: APIClient, mcp_dir: Path
) -> None:
    snippet = '[[mcp.servers]]\nname = "git"\ncommand = "uvx"\nargs = ["mcp-server-gitx"]\n'
    response = post_toml(admin_api, BASE_TOML + "\n" + snippet)
    assert response.json() == errors_of(
        (
            "mcp.servers.git.command",
            'mcp.servers.git.command: "uvx mcp-server-gitx" downloads the server when it starts, and MCP '
            f"servers run without network; install it first (python3 -m venv {mcp_dir}/venv && "
            f"{mcp_dir}/venv/bin/pip install mcp-server-gitx) and save again",
        )
    )


@pytest.mark.parametrize(
    ("command", "args"),
    [
        ("npx", [FS_PACKAGE, "/data"]),
        ("npx", ["--yes", f"{FS_PACKAGE}@latest", "/data"]),
        ("pnpm", ["dlx", FS_PACKAGE, "/data"]),
        ("bunx", [FS_PACKAGE, "/data"]),
        ("/usr/local/bin/npx", ["-y", FS_PACKAGE, "/data"]),
    ],
)
def test_each_npm_launcher_resolves_to_the_installed_command(
    admin_api: APIClient, mcp_dir: Path, command: str, args: list[str]
) -> None:
    body = {"name": "fs", "command": command, "args": args}
    response = admin_api.post(f"{V1}/mcp/servers/", body, format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["command"] == f"{mcp_dir}/node_modules/.bin/mcp-server-filesystem"
    assert response.json()["args"] == ["/data"]


def test_a_launcher_resolves_on_path_when_the_install_directory_lacks_it(
    admin_api: APIClient, mcp_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "mcp-server-git").write_text("#!/bin/sh\n")
    (bin_dir / "mcp-server-git").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    response = admin_api.post(
        f"{V1}/mcp/servers/", {"name": "git", "command": "uvx", "args": ["mcp-server-git"]}, format="json"
    )
    assert response.status_code == 201, response.json()
    assert response.json()["command"] == str(bin_dir / "mcp-server-git")


# --- mcpServers JSON ------------------------------------------------------------------------------

CLAUDE_CODE = {
    "mcpServers": {
        "filesystem": {"command": "npx", "args": ["-y", FS_PACKAGE, "${PROJECT_ROOT}"], "env": {}},
        "github": {
            "type": "http",
            "url": "https://api.githubcopilot.com/mcp/",
            "headers": {"Authorization": "Bearer ${GITHUB_PAT}", "X-Team": "${TEAM:-platform}"},
        },
        "notes": {"command": "/opt/notes/bin/notes-mcp", "env": {"NOTES_TOKEN": "${NOTES_TOKEN}"}},
    }
}
CURSOR = {"mcpServers": {"docs": {"url": "https://docs.example.com/mcp", "headers": {"X-Key": "k-1"}}}}
VSCODE = {
    "inputs": [{"type": "promptString", "id": "token", "password": True}],
    "servers": {
        "time": {
            "type": "stdio",
            "command": "uvx",
            "args": ["mcp-server-time"],
            "env": {"TZ": "${env:TZ_NAME}"},
        },
        "events": {"type": "sse", "url": "http://127.0.0.1:7000/sse", "cwd": "/tmp"},
    },
}


def test_claude_code_json_imports_with_variables_expanded_or_kept_as_references(
    admin_api: APIClient, mcp_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PROJECT_ROOT", "/srv/app")
    monkeypatch.setenv("GITHUB_PAT", "ghp-123")
    monkeypatch.delenv("TEAM", raising=False)
    response = post_json_import(admin_api, CLAUDE_CODE, "?bundle=imported")
    assert response.status_code == 200, response.json()
    assert response.json()["changes"] == [
        "+ mcp.servers.filesystem",
        "+ mcp.servers.github",
        "+ mcp.servers.notes",
        "+ mcp_bundles.imported",
    ]
    snap = config_snapshot_get()
    fs = snap.mcp_servers["filesystem"]
    assert (fs.transport, fs.command, fs.args) == (
        "stdio",
        f"{mcp_dir}/node_modules/.bin/mcp-server-filesystem",
        ("/srv/app",),
    )
    github = snap.mcp_servers["github"]
    assert (github.transport, github.url) == ("http", "https://api.githubcopilot.com/mcp/")
    assert secrets.mcp_secret_plain(github.headers["Authorization"]) == "Bearer ghp-123"
    assert secrets.mcp_secret_plain(github.headers["X-Team"]) == "platform"
    assert snap.mcp_servers["notes"].env["NOTES_TOKEN"].env == "NOTES_TOKEN"
    assert snap.mcp_bundles["imported"].servers == ("filesystem", "github", "notes")


def test_cursor_json_reads_a_url_without_type_as_streamable_http(admin_api: APIClient) -> None:
    assert post_json_import(admin_api, CURSOR).status_code == 200
    docs = config_snapshot_get().mcp_servers["docs"]
    assert (docs.transport, docs.url) == ("http", "https://docs.example.com/mcp")
    assert secrets.mcp_secret_plain(docs.headers["X-Key"]) == "k-1"


def test_vscode_json_imports_with_its_env_syntax_and_warns_of_what_it_skips(
    admin_api: APIClient, mcp_dir: Path
) -> None:
    response = post_json_import(admin_api, VSCODE)
    assert response.status_code == 200, response.json()
    assert response.json()["warnings"] == [
        'skipped unknown key "inputs"',
        'skipped unknown field "servers.events.cwd"',
        'mcp.servers.time.command: "uvx mcp-server-time" downloads the server when it starts; read as the '
        f'installed "{mcp_dir}/venv/bin/mcp-server-time"',
    ]
    snap = config_snapshot_get()
    assert snap.mcp_servers["time"].env["TZ"].env == "TZ_NAME"
    assert snap.mcp_servers["events"].transport == "sse"


def test_a_json_import_dry_run_writes_nothing_and_shows_the_toml_import_shape(
    admin_api: APIClient, base_config: None
) -> None:
    before = config_state()
    response = post_json_import(admin_api, CURSOR, "?dry_run=true")
    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"dry_run", "prune", "warnings", "changes", "kept", "summary", "diff"}
    assert body["dry_run"] is True
    assert body["changes"] == ["+ mcp.servers.docs"]
    assert '+name = "docs"' in body["diff"]
    assert "k-1" not in body["diff"]
    assert config_state() == before
    assert McpServer.objects.count() == 0


def test_a_json_import_with_one_bad_entry_writes_nothing(
    admin_api: APIClient, base_config: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MISSING_VAR", raising=False)
    body = {
        "mcpServers": {
            "good": {"command": "/bin/true"},
            "bad": {"command": "/bin/true", "args": ["${MISSING_VAR}"]},
            "vs": {"type": "http", "url": "https://x.example", "headers": {"A": "${input:token}"}},
            "odd": {"type": "websocket", "url": "ws://x"},
        }
    }
    before = config_state()
    response = post_json_import(admin_api, body)
    assert response.status_code == 400
    assert response.json() == errors_of(
        (
            "mcpServers.bad.args[0]",
            "mcpServers.bad.args[0] uses ${MISSING_VAR}, but MISSING_VAR is not set in Clawboard's environment",
        ),
        (
            "mcpServers.vs.headers.A",
            "mcpServers.vs.headers.A uses ${input:token}, a VS Code prompt that Clawboard cannot expand; "
            "write the value",
        ),
        (
            "mcpServers.odd.type",
            'mcpServers.odd.type = "websocket" is not a known type; expected stdio, http or sse',
        ),
    )
    assert config_state() == before
    assert McpServer.objects.count() == 0


def test_a_json_file_of_another_shape_is_refused(admin_api: APIClient) -> None:
    response = post_json_import(admin_api, {"tools": {}})
    assert response.status_code == 400
    assert response.json() == errors_of(
        (
            "",
            'expected a JSON object with "mcpServers" (Claude Code, Cursor) or "servers" (VS Code) mapping '
            "each server's name to its settings",
        )
    )


# --- REST -----------------------------------------------------------------------------------------


def test_servers_and_bundles_have_crud_with_revisions(admin_api: APIClient, base_config: None) -> None:
    revisions = ConfigRevision.objects.count()
    created = admin_api.post(
        f"{V1}/mcp/servers/",
        {
            "name": "api",
            "transport": "http",
            "url": "https://api.example/mcp",
            "headers": {"Authorization": "Bearer t0"},
        },
        format="json",
    )
    assert created.status_code == 201, created.json()
    assert created.json() == {
        "name": "api",
        "transport": "http",
        "command": "",
        "args": [],
        "env": {},
        "url": "https://api.example/mcp",
        "headers": {"Authorization": "********"},
        "tool_timeout_secs": None,
        "missing_secrets": [],
    }
    token = McpServer.objects.get(name="api").headers["Authorization"]["token"]
    # PUT of what GET shows keeps the stored secret (the mask stands for it): no change, no revision.
    shown = admin_api.get(f"{V1}/mcp/servers/api/").json()
    assert admin_api.put(f"{V1}/mcp/servers/api/", shown, format="json").status_code == 200
    assert McpServer.objects.get(name="api").headers["Authorization"]["token"] == token
    assert ConfigRevision.objects.count() == revisions + 1

    bundle = admin_api.post(f"{V1}/mcp/bundles/", {"alias": "remote", "servers": ["api"]}, format="json")
    assert bundle.status_code == 201
    assert bundle.json() == {"alias": "remote", "servers": ["api"], "exclude": []}
    assert (
        admin_api.patch(f"{V1}/agents/beta/", {"mcp_bundles": ["remote"]}, format="json").status_code == 200
    )

    renamed = admin_api.patch(
        f"{V1}/mcp/servers/api/", {"name": "api2", "tool_timeout_secs": 30}, format="json"
    )
    assert renamed.status_code == 200, renamed.json()
    assert renamed.json()["headers"] == {"Authorization": "********"}
    assert McpServer.objects.get(name="api2").headers["Authorization"]["token"] == token
    assert admin_api.get(f"{V1}/mcp/bundles/remote/").json()["servers"] == ["api2"]

    dry = admin_api.delete(f"{V1}/mcp/bundles/remote/?dry_run=true").json()
    assert dry == {
        "dry_run": True,
        "plan": ["remove mcp_bundles.remote", 'remove "remote" from agents.beta.mcp_bundles'],
        "errors": [],
    }
    assert admin_api.delete(f"{V1}/mcp/servers/api2/").status_code == 204
    assert admin_api.get(f"{V1}/mcp/bundles/remote/").json()["servers"] == []
    assert admin_api.delete(f"{V1}/mcp/bundles/remote/").status_code == 204
    assert config_snapshot_get().agents["beta"].mcp_bundles == ()
    summaries = list(ConfigRevision.objects.order_by("pk").values_list("summary", flat=True))[-6:]
    assert summaries == [
        "create mcp_servers.api",
        "create mcp_bundles.remote",
        "update agents.beta",
        "update mcp_servers.api -> api2",
        "delete mcp_servers.api2",
        "delete mcp_bundles.remote",
    ]


def test_a_create_reports_every_error_of_the_server_at_once(admin_api: APIClient) -> None:
    response = admin_api.post(
        f"{V1}/mcp/servers/", {"name": "x__y", "transport": "stdio", "tool_timeout_secs": -1}, format="json"
    )
    assert response.status_code == 400
    assert [e["field"] for e in response.json()["errors"]] == [
        "mcp.servers.x__y.name",
        "mcp.servers.x__y.command",
        "mcp.servers.x__y.tool_timeout_secs",
    ]


def test_the_mcp_switches_are_read_and_changed(admin_api: APIClient, viewer_api: APIClient) -> None:
    assert viewer_api.get(f"{V1}/mcp/").json() == {"enabled": True, "deferred_loading": False}
    assert viewer_api.patch(f"{V1}/mcp/", {"enabled": False}, format="json").status_code == 403
    changed = admin_api.patch(f"{V1}/mcp/", {"deferred_loading": True}, format="json")
    assert changed.json() == {"enabled": True, "deferred_loading": True}
    bad = admin_api.patch(f"{V1}/mcp/", {"enabled": "yes"}, format="json")
    assert bad.status_code == 400
    assert bad.json() == errors_of(("mcp.enabled", "mcp.enabled must be a boolean"))
    assert ConfigRevision.objects.order_by("-pk").first().summary == "update mcp"  # type: ignore[union-attr]


def test_viewers_read_servers_but_cannot_import(viewer_api: APIClient) -> None:
    assert viewer_api.get(f"{V1}/mcp/servers/").status_code == 200
    assert post_json_import(viewer_api, CURSOR).status_code == 403


def test_a_toml_import_without_mcp_sections_keeps_the_servers(admin_api: APIClient) -> None:
    assert post_json_import(admin_api, CURSOR).status_code == 200
    assert admin_api.patch(f"{V1}/mcp/", {"enabled": False}, format="json").status_code == 200
    response = post_toml(admin_api, BASE_TOML)
    assert "= mcp.servers.docs (not in the file: kept; prune=true deletes it)" in response.json()["summary"]
    snap = config_snapshot_get()
    assert list(snap.mcp_servers) == ["docs"]
    assert snap.mcp.enabled is False


def test_the_export_parses_back_to_the_same_snapshot(admin_api: APIClient, mcp_dir: Path) -> None:
    assert post_toml(admin_api, FIXTURE.read_text()).status_code == 200
    snap = config_snapshot_get()
    again = parse_toml(export_toml(snap)).snapshot
    assert export_toml(again) == export_toml(snap)


def test_restoring_a_revision_keeps_the_stored_secrets(admin_api: APIClient, mcp_dir: Path) -> None:
    assert post_toml(admin_api, FIXTURE.read_text()).status_code == 200
    first = ConfigRevision.objects.order_by("-pk").first()
    assert first is not None
    token = McpServer.objects.get(name="time").env["TZ_FALLBACK"]["token"]
    assert (
        admin_api.patch(f"{V1}/mcp/servers/time/", {"tool_timeout_secs": 5}, format="json").status_code == 200
    )
    restored = admin_api.post(f"{V1}/config/revisions/{first.pk}/restore/")
    assert restored.status_code == 200, restored.json()
    row = McpServer.objects.get(name="time")
    assert (row.tool_timeout_secs, row.env["TZ_FALLBACK"]["token"]) == (None, token)


def test_key_rotation_re_encrypts_the_mcp_secrets(
    admin_api: APIClient, mcp_dir: Path, tmp_path: Path, settings: Any
) -> None:
    import io

    from django.core.management import call_command

    settings.DATA_DIR = tmp_path
    settings.CLAWBOARD_ENCRYPTION_KEY = ""
    assert post_toml(admin_api, FIXTURE.read_text()).status_code == 200
    old_token = McpServer.objects.get(name="time").env["TZ_FALLBACK"]["token"]
    out = io.StringIO()
    call_command("clawboard_rotate_key", "--new-key", "--drop-old", stdout=out)
    assert out.getvalue().strip() == "re-encrypted 0 provider key(s) and 1 MCP secret(s) with the current key"
    row = McpServer.objects.get(name="time")
    assert row.env["TZ_FALLBACK"]["token"] != old_token
    assert secrets.decrypt(row.env["TZ_FALLBACK"]["token"]) == "UTC"
    assert row.headers == {} and McpServer.objects.get(name="github").headers == {"Authorization": {}}
