from django.apps import AppConfig


class AgentsAppConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "agents_app"
