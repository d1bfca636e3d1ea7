"""Settings: everything comes from the environment (django-environ), with working
defaults for the embedded mode (SQLite in WAL mode, in-process worker, in-memory layer)."""

import os
from pathlib import Path

import environ
from django.core.exceptions import ImproperlyConfigured

from traces_app import config as traces_config
from zeroclaw_site.dbpool import pool_max_setting

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()
environ.Env.read_env(BASE_DIR / ".env", overwrite=False) if (BASE_DIR / ".env").exists() else None

# Off unless asked for (`make run DEBUG=1`): Django's debug pages list every URL pattern and
# setting, so they are never reachable by default.
DEBUG = env.bool("DJANGO_DEBUG", default=False)
# Served behind TLS (a proxy that terminates HTTPS): the HTTPS redirect, Secure cookies and
# HSTS. Its own setting, not DEBUG's opposite: the embedded default serves plain HTTP on
# 127.0.0.1 with DEBUG off, where all three would lock the operator out.
CLAWBOARD_TLS = env.bool("CLAWBOARD_TLS", default=False)
SECRET_KEY = env.str("SECRET_KEY", default="dev-insecure-clawboard-key-change-me-in-production-0123456789")
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "testserver"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])
DATA_DIR = Path(env.str("DATA_DIR", default=str(BASE_DIR / "var"))).resolve()
DATA_DIR.mkdir(parents=True, exist_ok=True)  # a fresh clone has no var/ yet; SQLite needs its folder
# Fernet keys (comma-separated, the first encrypts) for provider API keys kept in the database;
# empty = embedded mode generates DATA_DIR/encryption-key.txt (agents_app/secrets.py).
CLAWBOARD_ENCRYPTION_KEY = env.str("CLAWBOARD_ENCRYPTION_KEY", default="")
# Where MCP servers are installed ahead of time (npm packages under node_modules/.bin, PyPI ones
# under venv/bin): a launcher such as `npx -y <pkg>` is resolved against it (docs/configuration.md).
MCP_SERVERS_DIR = Path(
    env.str("MCP_SERVERS_DIR", default=str(Path.home() / ".cache" / "clawboard" / "mcp"))
).expanduser()

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    "channels",
    "policies_app",
    "agents_app",
    "runs_app",
    "traces_app",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # A body over DATA_UPLOAD_MAX_MEMORY_SIZE is a 413 before anything reads it.
    "zeroclaw_site.middleware.BodySizeLimitMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

ROOT_URLCONF = "zeroclaw_site.urls"
WSGI_APPLICATION = "zeroclaw_site.wsgi.application"
ASGI_APPLICATION = "zeroclaw_site.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "zeroclaw_site.context_processors.clawboard",
            ],
        },
    },
]

_SQLITE_OPTIONS = {
    "transaction_mode": "IMMEDIATE",
    "timeout": 30,
    "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA busy_timeout=30000; PRAGMA temp_store=MEMORY;",
}
# The pool's max size (PostgreSQL), and whether the operator set it: unset, a Celery worker
# raises it to fit its -c threads when it starts; set too small for them, the worker refuses
# to start (zeroclaw_site/dbpool.py).
CLAWBOARD_DB_POOL_MAX, CLAWBOARD_DB_POOL_EXPLICIT = pool_max_setting(
    env.str("CLAWBOARD_DB_POOL_MAX", default="")
)
DATABASES = {"default": env.db_url("DATABASE_URL", default=f"sqlite:///{DATA_DIR / 'clawboard.sqlite3'}")}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL: readers never wait for the writer. IMMEDIATE: a transaction takes the write lock at
    # its start, so two writers queue (busy timeout) instead of failing halfway with "database
    # is locked" when one tries to upgrade a read lock.
    DATABASES["default"].setdefault("OPTIONS", {}).update(_SQLITE_OPTIONS)
    # Keep each thread's connection between tasks and requests: opening one runs the PRAGMAs
    # and registers Django's SQL functions, which cost more than a child's whole step.
    DATABASES["default"].setdefault("CONN_MAX_AGE", env.int("CONN_MAX_AGE", default=60))
    # One test database per process, so parallel test runs never share a file.
    DATABASES["default"]["TEST"] = {"NAME": str(DATA_DIR / f"test-clawboard-{os.getpid()}.sqlite3")}
elif (_pool_max := CLAWBOARD_DB_POOL_MAX) > 0:
    # A pool of connections per process (psycopg's, through Django): threads borrow one and
    # give it back when Django closes it, so a process never holds more than this many, however
    # many threads serve requests or wait. Without it, daphne kept one connection per thread
    # (64 waiting threads and more), and PostgreSQL's 100 ran out under load: HTTP 500s.
    # A thread that finds the pool empty waits for a connection (CLAWBOARD_DB_POOL_TIMEOUT s).
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
        "min_size": 1,
        "max_size": _pool_max,
        "timeout": env.float("CLAWBOARD_DB_POOL_TIMEOUT", default=30.0),
    }
    DATABASES["default"]["CONN_MAX_AGE"] = 0  # pooled connections go back to the pool instead
else:
    # Keep connections between requests and tasks (a new PostgreSQL connection per task costs
    # more than the task); health checks drop one that died.
    DATABASES["default"].setdefault("CONN_MAX_AGE", env.int("CONN_MAX_AGE", default=60))
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = True

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = DATA_DIR / "static"

LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/accounts/login/"

DATA_UPLOAD_MAX_MEMORY_SIZE = env.int("DATA_UPLOAD_MAX_MEMORY_SIZE", default=2 * 1024 * 1024)

# The cache holds the request-rate counters (DRF throttling) and nothing else: a per-process
# LocMem cache by default; CACHE_URL (e.g. redis://127.0.0.1:6379/2) shares them across processes.
CACHES = {"default": env.cache_url("CACHE_URL", default="locmemcache://clawboard")}
# Runs a user may start per period (POST /runs/, spawn, delegate, continue, resume and the
# dashboard's forms, counted together), e.g. "120/min", "5/s", "1000/hour"; "off" = no limit.
_run_rate = env.str("CLAWBOARD_RUN_RATE", default="120/min").strip()
CLAWBOARD_RUN_RATE: str | None = None if _run_rate.lower() in ("", "off", "none") else _run_rate

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["agents_app.api.permissions.IsViewer"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    # Depth-limited JSON: a hugely nested body is a 400, never a RecursionError.
    "DEFAULT_PARSER_CLASSES": ["agents_app.api.parsers.JSONParser"],
    "EXCEPTION_HANDLER": "agents_app.api.errors.exception_handler",
    # An empty or unknown ?format= is a 400 field error (DRF: ignored, or a 404).
    "DEFAULT_CONTENT_NEGOTIATION_CLASS": "agents_app.api.negotiation.StrictFormatNegotiation",
    # Read by runs_app.api.throttling.RunStartThrottle at each request (so override_settings works).
    "DEFAULT_THROTTLE_RATES": {"runs": CLAWBOARD_RUN_RATE},
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}

SPECTACULAR_SETTINGS = {
    "TITLE": "Clawboard API",
    "DESCRIPTION": "Control plane for agents that spawn subagents and delegate to each other.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    # Swagger UI and Redoc from the drf-spectacular-sidecar package's static files, never a CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # Every operation documents the errors it can answer (401, 403, 404, 413, 415, 429, ...).
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "agents_app.api.schema.document_errors",
    ],
}

# Channels: in-memory for the embedded mode, Redis for scale-out.
CHANNEL_LAYER_URL = env.str("CHANNEL_LAYER_URL", default="")
if CHANNEL_LAYER_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            # redis-py's default socket timeout (5 s) equals channels_redis's blocking read, so a
            # quiet websocket's receive() would time out and drop the socket; wait longer.
            # Every channel of a process shares one Redis list, and channels_redis drops what
            # goes over `capacity` without a word (its default, 100, is one busy tree's burst).
            "CONFIG": {
                "hosts": [{"address": CHANNEL_LAYER_URL, "socket_timeout": 15}],
                "capacity": env.int("CLAWBOARD_CHANNEL_CAPACITY", default=10_000),
            },
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

# Celery: memory:// broker with an in-process worker (embedded) or Redis (scale-out).
CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", default="memory://localhost/")
CELERY_RESULT_BACKEND = None
CELERY_TASK_ALWAYS_EAGER = env.bool("CELERY_TASK_ALWAYS_EAGER", default=False)
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_IGNORE_RESULT = True
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Celery's Django fix-up closes the task thread's database connection before and after every
# task unless this is set, and a task is often one short step: reopening cost more than the
# step. With it, a connection is kept for this many tasks; CONN_MAX_AGE and the tasks' own
# close_old_connections() still drop one that is old or broken.
CELERY_DB_REUSE_MAX = env.int("CELERY_DB_REUSE_MAX", default=1000)
CLAWBOARD_WORKERS = env.int("CLAWBOARD_WORKERS", default=4)
# Supervision (SPEC §4): how often the reaper sweeps, when a heartbeat counts as stale, and
# when a queued run with no worker on it is enqueued again.
CLAWBOARD_REAP_SECS = env.float("CLAWBOARD_REAP_SECS", default=30.0)
CLAWBOARD_STALE_SECS = env.float("CLAWBOARD_STALE_SECS", default=30.0)
CLAWBOARD_REQUEUE_SECS = env.float("CLAWBOARD_REQUEUE_SECS", default=60.0)
if CELERY_BROKER_URL.startswith("redis"):
    # A message taken by a worker that died is redelivered after this many seconds.
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "visibility_timeout": env.int("CLAWBOARD_VISIBILITY_SECS", default=300)
    }
CELERY_BEAT_SCHEDULE = {
    "reap": {"task": "runs.reap", "schedule": CLAWBOARD_REAP_SECS},
    "fire-schedules": {"task": "runs.fire_schedules", "schedule": 30.0},
    "export-traces": {"task": "traces.sweep", "schedule": CLAWBOARD_REAP_SECS},
}

CSRF_FAILURE_VIEW = "zeroclaw_site.views.csrf_failure"

# Traces of runs over OTLP/HTTP (traces_app, docs/deployment.md#traces): on when the SDK's
# endpoint variable is set; prompts and tool arguments only with the GenAI content switch.
CLAWBOARD_TRACES_EXPORT = traces_config.export_enabled()
CLAWBOARD_TRACES_CAPTURE = traces_config.capture_content()
# How far back the sweep looks for ended trees never exported (a lost task message).
CLAWBOARD_TRACES_HORIZON_HOURS = env.float("CLAWBOARD_TRACES_HORIZON_HOURS", default=24.0)
CLAWBOARD_TRACES_SPANS_PER_TASK = env.int("CLAWBOARD_TRACES_SPANS_PER_TASK", default=5000)

if CLAWBOARD_TLS:
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=True)
    SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=31536000)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

# CLAWBOARD_LOG_FORMAT=json: one JSON object per line, a run's records with its ids
# (zeroclaw_site/jsonlogs.py); the server's and the workers' logs alike.
CLAWBOARD_LOG_FORMAT = env.str("CLAWBOARD_LOG_FORMAT", default="text")
if CLAWBOARD_LOG_FORMAT not in ("text", "json"):
    raise ImproperlyConfigured(f"CLAWBOARD_LOG_FORMAT must be text or json, not {CLAWBOARD_LOG_FORMAT!r}")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"run": {"()": "zeroclaw_site.jsonlogs.RunFilter"}},
    "formatters": {
        "text": {"format": "%(message)s"},
        "json": {"()": "zeroclaw_site.jsonlogs.JsonFormatter"},
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "filters": ["run"],
            "formatter": CLAWBOARD_LOG_FORMAT,
        }
    },
    "root": {"handlers": ["console"], "level": env.str("LOG_LEVEL", default="WARNING")},
}
# A Celery worker keeps the handlers above instead of installing its own.
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
