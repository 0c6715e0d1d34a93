"""gunicorn settings for `gunicorn wsgi:app -c gunicorn.conf.py` (the Procfile's web).

They live in the package (app/gunicorn_config.py), so that `hooklatch serve` and an
installed hooklatch start the same web process. They are read anew each time gunicorn
loads this file (at start, and on SIGHUP), from the environment of that moment.
"""

import runpy

globals().update(
    (name, value)
    for name, value in runpy.run_module("hooklatch.gunicorn_config").items()
    if not name.startswith("__")
)
