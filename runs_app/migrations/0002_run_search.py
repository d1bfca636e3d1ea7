"""Full-text search over a run's prompt, output and error (runs_app.selectors.run_search).

SQLite (embedded): an FTS5 table kept by triggers on runs_app_run. Its rowids come from
runs_app_runsearchkey, whose INTEGER PRIMARY KEY is stable (the rowid of runs_app_run itself is
not: VACUUM may renumber it). PostgreSQL (scale-out): a GIN index over the very expression the
selector queries. Any other database: nothing, and the selector falls back to LIKE.

A later migration that makes SQLite rebuild runs_app_run (an altered column) drops its triggers:
such a migration must run SQLITE_TRIGGERS again (tests/dashboard/test_run_list.py would fail).
"""

from django.db import migrations

SQLITE_TABLES = [
    "CREATE TABLE IF NOT EXISTS runs_app_runsearchkey (id INTEGER PRIMARY KEY, run_id char(32) NOT NULL UNIQUE)",
    "CREATE VIRTUAL TABLE IF NOT EXISTS runs_app_run_fts USING fts5(prompt, output, error, tokenize='unicode61')",
]
KEY_OF_NEW = "(SELECT id FROM runs_app_runsearchkey WHERE run_id = new.id)"
KEY_OF_OLD = "(SELECT id FROM runs_app_runsearchkey WHERE run_id = old.id)"
SQLITE_TRIGGERS = [
    f"""CREATE TRIGGER IF NOT EXISTS runs_app_run_fts_insert AFTER INSERT ON runs_app_run BEGIN
        INSERT OR IGNORE INTO runs_app_runsearchkey (run_id) VALUES (new.id);
        INSERT INTO runs_app_run_fts (rowid, prompt, output, error)
            VALUES ({KEY_OF_NEW}, new.prompt, new.output, new.error);
    END""",
    f"""CREATE TRIGGER IF NOT EXISTS runs_app_run_fts_update AFTER UPDATE OF prompt, output, error ON runs_app_run
    WHEN old.prompt IS NOT new.prompt OR old.output IS NOT new.output OR old.error IS NOT new.error BEGIN
        DELETE FROM runs_app_run_fts WHERE rowid = {KEY_OF_OLD};
        INSERT INTO runs_app_run_fts (rowid, prompt, output, error)
            VALUES ({KEY_OF_NEW}, new.prompt, new.output, new.error);
    END""",
    f"""CREATE TRIGGER IF NOT EXISTS runs_app_run_fts_delete AFTER DELETE ON runs_app_run BEGIN
        DELETE FROM runs_app_run_fts WHERE rowid = {KEY_OF_OLD};
        DELETE FROM runs_app_runsearchkey WHERE run_id = old.id;
    END""",
]
SQLITE_BACKFILL = [
    "INSERT OR IGNORE INTO runs_app_runsearchkey (run_id) SELECT id FROM runs_app_run",
    """INSERT INTO runs_app_run_fts (rowid, prompt, output, error)
        SELECT k.id, r.prompt, r.output, r.error FROM runs_app_run r JOIN runs_app_runsearchkey k ON k.run_id = r.id""",
]
SQLITE_DROP = [
    "DROP TRIGGER IF EXISTS runs_app_run_fts_insert",
    "DROP TRIGGER IF EXISTS runs_app_run_fts_update",
    "DROP TRIGGER IF EXISTS runs_app_run_fts_delete",
    "DROP TABLE IF EXISTS runs_app_run_fts",
    "DROP TABLE IF EXISTS runs_app_runsearchkey",
]

# Must stay the expression of runs_app.selectors.PG_SEARCH_VECTOR, or the index is never used.
PG_VECTOR = (
    "to_tsvector('simple'::regconfig, left(prompt, 100000) || ' ' || left(output, 100000)"
    " || ' ' || left(error, 100000))"
)
PG_CREATE = [f"CREATE INDEX IF NOT EXISTS runs_app_run_search ON runs_app_run USING gin ({PG_VECTOR})"]
PG_DROP = ["DROP INDEX IF EXISTS runs_app_run_search"]


def _run(schema_editor, statements):
    for sql in statements:
        schema_editor.execute(sql)


def forwards(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    if vendor == "sqlite":
        _run(schema_editor, SQLITE_TABLES + SQLITE_BACKFILL + SQLITE_TRIGGERS)
    elif vendor == "postgresql":
        _run(schema_editor, PG_CREATE)


def backwards(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    if vendor == "sqlite":
        _run(schema_editor, SQLITE_DROP)
    elif vendor == "postgresql":
        _run(schema_editor, PG_DROP)


class Migration(migrations.Migration):
    dependencies = [("runs_app", "0001_initial")]

    operations = [migrations.RunPython(forwards, backwards, elidable=False)]
