"""Scale-out chaos in the suite: two web servers, two relays and three workers, one of them
SIGKILLed with its whole process tree every 1 to 2 s while events arrive three times each.
Every event answered 200 has exactly one handler run, none has none, and all are processed
within grace + two sweeps + an allowance for processing after the last kill (the allowance
is generous: the suite shares two cores, so this catches stalls, not slow recoveries).
`make chaos` runs the same scenario longer."""

import pytest

from bench.chaos import ChaosPlan, run
from tests.support.database import REDIS, fresh_database


@pytest.mark.slow
def test_random_kills_of_every_process_type_lose_and_double_nothing(tmp_path):
    plan = ChaosPlan(
        events=150,
        sends=3,
        send_seconds=15,
        grace_seconds=1.0,
        sweep_seconds=0.5,
        allowance_seconds=15.0,
        handler_seconds=0.05,
    )
    with fresh_database("hooklatch_chaos") as database_url:
        result = run(plan, database_url, REDIS, tmp_path)
    print(result.summary())
    assert len(result.kills) >= 5
    assert result.problems == []
