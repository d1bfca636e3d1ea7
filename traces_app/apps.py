from django.apps import AppConfig


class TracesAppConfig(AppConfig):
    name = "traces_app"
    verbose_name = "Trace export"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from runs_app import events
        from traces_app import signals

        events.written.connect(signals.events_written, dispatch_uid="traces_app.events_written")
