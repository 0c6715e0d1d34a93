"""`hooklatch worker` whose RQ worker meets a Redis error in its first maintenance, as on
a Redis blip at that moment: RQ logs it and returns from its loop. The blip happens once
per worker, whichever work horse meets it (a file says it happened)."""

import os
from pathlib import Path

from redis.exceptions import ConnectionError as RedisConnectionError

from hooklatch.assembly import build_runtime
from hooklatch.settings import Settings
from hooklatch.workers.worker.main import run_worker
from hooklatch.workers.worker.rq_workers import SimpleHooklatchWorker

BLIPPED = Path(os.environ["HOOKLATCH_TEST_BLIPPED"])


class BlippingWorker(SimpleHooklatchWorker):
    def run_maintenance_tasks(self):
        if not BLIPPED.exists():
            BLIPPED.touch()
            raise RedisConnectionError("Connection reset by peer (a blip, from the test)")
        super().run_maintenance_tasks()


def main() -> None:
    run_worker(build_runtime(Settings.from_env()), worker_class=BlippingWorker)


if __name__ == "__main__":
    main()
