"""Forms as good as the API: the agent form shows every error in one round and the alias rule
in plain words; the import page shows each error with its path and its line in the file."""

from __future__ import annotations

import re

from django.test import Client

from agents_app.toml_lines import line_of
from tests.dashboard.support import error_items, state, text_of
from tests.dashboard.test_config_forms import agent_form

ALIAS_WORDS = (
    '"Bad Alias!" cannot be an alias: use 1 to 64 lowercase letters, digits, "-" or "_", '
    "starting with a letter or a digit."
)


def test_a_bad_alias_reads_in_plain_words_and_hides_no_other_error(admin: Client) -> None:
    before = state()
    response = admin.post("/agents/new/", agent_form("Bad Alias!", model_provider="nodots"))
    assert response.status_code == 400
    assert error_items(response) == [
        ALIAS_WORDS,
        'agents.Bad Alias!.model_provider must be dotted form <type>.<alias> (got "nodots")',
    ]
    assert "[a-z0-9]" not in text_of(response)
    assert state() == before


IMPORT = """\
[providers.models.scripted.demo]
model = "demo-1"

[risk_profiles.team]

[agents.a]
model_provider = "x"
risk_profile = "team"
delegates = ["a"]
"""


def test_each_import_error_shows_its_path_and_line(admin: Client) -> None:
    before = state()
    response = admin.post("/config/import/preview/", {"toml": IMPORT})
    body = response.content.decode()
    wheres = re.findall(r'<span class="where">(.*?)</span>', body)
    assert wheres == [
        "<code>agents.a.model_provider</code> line 7",
        "<code>agents.a.delegates[0].agent</code> line 9",
    ]
    assert state() == before


def test_a_malformed_file_shows_its_line(admin: Client) -> None:
    broken = '[agents.a]\nmodel_provider = "scripted.demo"\nrisk_profile = = "team"\n'
    body = admin.post("/config/import/preview/", {"toml": broken}).content.decode()
    assert re.findall(r'<span class="where">(.*?)</span>', body) == [" line 3"]


def test_a_clean_preview_marks_the_import_as_ready(admin: Client) -> None:
    clean = '[providers.models.scripted.demo]\nmodel = "demo-2"\n'
    assert 'id="import-ready"' in admin.post("/config/import/preview/", {"toml": clean}).content.decode()
    assert 'id="import-ready"' not in admin.post("/config/import/preview/", {"toml": IMPORT}).content.decode()


def test_the_import_button_waits_for_a_preview(admin: Client) -> None:
    page = admin.get("/config/").content.decode()
    assert re.search(r'<button type="submit" class="primary" id="import-apply" disabled', page)


def test_line_of_finds_keys_tables_and_the_nearest_table_of_a_missing_key() -> None:
    text = '[agents."my agent"]\nmodel_provider = "x"\n\n[[mcp.servers]]\nname = "fs"\n'
    assert line_of(text, 'agents."my agent".model_provider') == 2
    assert line_of(text, "agents.my agent.risk_profile") == 1
    assert line_of(text, "mcp.servers[0].name") == 5
    assert line_of(text, "providers.x") is None
