"""Django's SQLite backend, with the writers of one process queued on a lock (see base.py)."""
