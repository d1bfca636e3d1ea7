"""Celery application. Tasks are thin: they take ids and call services."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "zeroclaw_site.settings")

app = Celery("zeroclaw_site")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
