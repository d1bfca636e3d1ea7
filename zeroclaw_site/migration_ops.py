"""Helpers for migrations."""

from __future__ import annotations

from typing import Any

from django.db import migrations


def drop_single_column_indexes(app_label: str, pairs: list[tuple[str, str]]) -> migrations.RunPython:
    """Drop the plain one-column index of each (model, field), keeping the table as it is.

    Used with `SeparateDatabaseAndState` for a field whose `db_index` goes to False: Django's
    own AlterField remakes the whole table on SQLite (copying every row) where dropping the
    index is enough. Reversible: the index is created again."""

    def single_column_indexes(schema_editor: Any, model: Any, column: str) -> list[str]:
        with schema_editor.connection.cursor() as cursor:
            constraints = schema_editor.connection.introspection.get_constraints(cursor, model._meta.db_table)
        return [
            name
            for name, info in constraints.items()
            if info["index"]
            and not info["unique"]
            and not info["primary_key"]
            and info["columns"] == [column]
        ]

    def forwards(apps: Any, schema_editor: Any) -> None:
        for model_name, field_name in pairs:
            model = apps.get_model(app_label, model_name)
            column = model._meta.get_field(field_name).column
            for name in single_column_indexes(schema_editor, model, column):
                schema_editor.execute(schema_editor._delete_index_sql(model, name))

    def backwards(apps: Any, schema_editor: Any) -> None:
        for model_name, field_name in pairs:
            model = apps.get_model(app_label, model_name)
            field = model._meta.get_field(field_name)
            if not single_column_indexes(schema_editor, model, field.column):
                schema_editor.execute(schema_editor._create_index_sql(model, fields=[field]))

    return migrations.RunPython(forwards, backwards)
