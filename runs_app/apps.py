from django.apps import AppConfig


class RunsAppConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "runs_app"

    def ready(self) -> None:
        from runs_app import notices

        notices.connect_signals()
