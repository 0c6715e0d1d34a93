"""gunicorn settings for `gunicorn wsgi:app -c gunicorn.conf.py` (the Procfile's web)."""

import multiprocessing
import os

bind = f"{os.environ.get('HOST', '0.0.0.0')}:{os.environ.get('PORT', '8000')}"  # noqa: S104
if os.environ.get("DATABASE_URL"):
    workers = int(os.environ.get("WEB_CONCURRENCY", multiprocessing.cpu_count() * 2))
else:
    # The embedded default keeps its dispatcher in the one web process.
    workers = 1
worker_class = os.environ.get("GUNICORN_WORKER_CLASS") or ("gthread" if workers == 1 else "sync")
threads = int(os.environ.get("GUNICORN_THREADS") or (4 if workers == 1 else 1))
# Providers give up after a few seconds (Slack 3 s, GitHub 10 s): never hold a request longer.
timeout = int(os.environ.get("GUNICORN_TIMEOUT", 30))
graceful_timeout = 20
keepalive = 5
accesslog = os.environ.get("GUNICORN_ACCESS_LOG") or None
forwarded_allow_ips = os.environ.get("FORWARDED_ALLOW_IPS", "127.0.0.1")
