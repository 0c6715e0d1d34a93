"""gunicorn.conf.py, the Procfile web process's settings, loaded as gunicorn loads it."""

import gc
import runpy
from pathlib import Path

import pytest

CONF = Path(__file__).resolve().parents[2] / "gunicorn.conf.py"


@pytest.fixture
def conf():
    return runpy.run_path(str(CONF))


def test_a_worker_freezes_what_it_loaded_so_that_full_collections_skip_it(conf):
    """A full collection in a web worker used to walk every object the app loaded (about
    100,000) and stall the worker's requests for tens of milliseconds under load."""
    gc.unfreeze()
    try:
        conf["post_worker_init"](object())
        assert gc.get_freeze_count() > 10_000
    finally:
        gc.unfreeze()
