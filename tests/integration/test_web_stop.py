"""SIGTERM to the web process (the Procfile's command) while deliveries are in flight:
each is answered and stored, whole, before it exits; none is cut off half stored."""

import signal
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.support.database import stored_for
from tests.support.http import timed_delivery
from tests.support.pipeline import make_endpoint
from tests.support.processes import start_procfile_web

SECRET = "whsec_test_secret"


@pytest.mark.slow
def test_sigterm_lets_deliveries_in_flight_finish_then_stops(procs, proc_settings, runtime):
    base, _, web = start_procfile_web(procs, proc_settings)
    endpoint, _ = make_endpoint(runtime, "stripe", secrets=[SECRET])

    with ThreadPoolExecutor(8) as pool, runtime.engine.connect() as locker:
        # Every delivery waits in the database until the test lets go of the lock.
        locker.exec_driver_sql("LOCK TABLE endpoints IN ACCESS EXCLUSIVE MODE")
        waiting = [
            pool.submit(timed_delivery, f"{base}/hooks/{endpoint}", f"evt_in_flight_{n}", SECRET)
            for n in range(8)
        ]
        time.sleep(1)  # all of them are in the database, waiting
        web.popen.send_signal(signal.SIGTERM)
        time.sleep(1)  # gunicorn has taken the signal and stopped accepting
        assert web.popen.poll() is None, web.log()  # it waits for the requests under way
        locker.rollback()
        answers = [future.result() for future in waiting]

    assert [status for status, _ in answers] == [200] * 8, (answers, web.log()[-3000:])
    assert web.popen.wait(timeout=30) == 0, web.log()[-3000:]
    assert stored_for(runtime, endpoint) == 8
