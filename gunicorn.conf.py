"""gunicorn settings for `gunicorn wsgi:app -c gunicorn.conf.py` (the Procfile's web).

They live in the package (app/gunicorn_config.py), so that `hooklatch serve` and an
installed hooklatch start the same web process. gunicorn runs this file at start and
again on a reload (SIGHUP), which reloads the settings module (that works whatever loader
imported it, where runpy needs one with get_code); but the environment they are read
from is still the one the master started with, so a reload changes no setting: restart
the web process to change one (docs/configuration.md).
"""

import importlib
import os
import sys

# gunicorn has put the folder it runs in (this file's, wsgi.py's) first on the import path.
# Last, it still serves `import wsgi`, and a project's module named hooklatch, or like
# one of its libraries, does not hide them (app/gunicorn_config.py says more).
if sys.path and os.path.realpath(sys.path[0]) == os.path.realpath(os.getcwd()):
    sys.path.append(sys.path.pop(0))

# Names of this file's own start with _: gunicorn takes any other that names a setting
# (even `config`).
_NAME = "hooklatch.gunicorn_config"
_module = (
    importlib.reload(sys.modules[_NAME]) if _NAME in sys.modules else importlib.import_module(_NAME)
)

globals().update(
    (name, value) for name, value in vars(_module).items() if not name.startswith("__")
)
