"""Drop one-column indexes that lead a composite index of the same table: the composite one
serves the same lookups, and every insert or change of the column wrote both."""

import django.db.models.deletion
from django.db import migrations, models

from zeroclaw_site.migration_ops import drop_single_column_indexes


class Migration(migrations.Migration):
    dependencies = [
        ("runs_app", "0006_run_parent_status_index"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[
                drop_single_column_indexes(
                    "runs_app",
                    [
                        ("run", "parent"),
                        ("run", "root"),
                        ("run", "status"),
                        ("runevent", "root_id"),
                        ("toolcall", "run"),
                        ("message", "run"),
                    ],
                )
            ],
            state_operations=[
                migrations.AlterField(
                    model_name="run",
                    name="parent",
                    field=models.ForeignKey(
                        blank=True,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="children",
                        to="runs_app.run",
                    ),
                ),
                migrations.AlterField(
                    model_name="run",
                    name="root",
                    field=models.ForeignKey(
                        blank=True,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="runs_app.run",
                    ),
                ),
                migrations.AlterField(
                    model_name="run",
                    name="status",
                    field=models.CharField(
                        choices=[
                            ("queued", "Queued"),
                            ("running", "Running"),
                            ("waiting", "Waiting"),
                            ("awaiting_approval", "Awaiting Approval"),
                            ("completed", "Completed"),
                            ("failed", "Failed"),
                            ("cancelled", "Cancelled"),
                            ("timed_out", "Timed Out"),
                            ("lost", "Lost"),
                        ],
                        default="queued",
                        max_length=20,
                    ),
                ),
                migrations.AlterField(
                    model_name="runevent",
                    name="root_id",
                    field=models.UUIDField(),
                ),
                migrations.AlterField(
                    model_name="toolcall",
                    name="run",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="tool_calls",
                        to="runs_app.run",
                    ),
                ),
                migrations.AlterField(
                    model_name="message",
                    name="run",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="messages",
                        to="runs_app.run",
                    ),
                ),
            ],
        ),
    ]
