"""Drop one-column indexes that lead a composite index of the same table: the composite one
serves the same lookups, and every insert or change of the column wrote both."""

import django.db.models.deletion
from django.db import migrations, models

from zeroclaw_site.migration_ops import drop_single_column_indexes


class Migration(migrations.Migration):
    dependencies = [
        ("policies_app", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[
                drop_single_column_indexes(
                    "policies_app", [("trackeraction", "tracker"), ("trackercost", "tracker")]
                )
            ],
            state_operations=[
                migrations.AlterField(
                    model_name="trackeraction",
                    name="tracker",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="actions",
                        to="policies_app.tracker",
                    ),
                ),
                migrations.AlterField(
                    model_name="trackercost",
                    name="tracker",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="costs",
                        to="policies_app.tracker",
                    ),
                ),
            ],
        ),
    ]
