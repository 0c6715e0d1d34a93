"""Hostile senders, in one run: slow clients (bench/slow_clients.py) and a flood of bad
signatures (bench/flood.py), one after the other on the same machine, database and
build, so that the figures of both can be read side by side.

`python -m bench.hostile [--smoke] [--rounds N]` prints both summaries, and the JSON of
both with `--json`. `make bench-smoke` runs it with --smoke: checks, not figures.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import replace

import click

from bench import flood, slow_clients
from bench.scenarios import Plan, echo_figures, prepared_bench


@click.command()
@click.option("--smoke", is_flag=True, help="A few seconds per phase: checks, not figures.")
@click.option("--rounds", default=3, show_default=True, help="Rounds of each measurement.")
@click.option("--seconds", type=float, default=None, help="Seconds per flood phase [30].")
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON too.")
def main(smoke: bool, rounds: int, seconds: float | None, as_json: bool) -> None:
    slow_plan = slow_clients.SlowPlan.for_run(smoke)
    flood_plan = flood.FloodPlan.for_run(smoke)
    flood_plan = replace(flood_plan, seconds=seconds or flood_plan.seconds)
    rounds = 1 if smoke else rounds
    with prepared_bench(Plan.for_run(smoke), flood.REDIS_URL) as bench:
        slow = slow_clients.run(bench, slow_plan, rounds)
        flooded = flood.run(bench, flood_plan, rounds)
    date = dt.date.today().isoformat()
    both = {"date": date, "slow_clients": slow, "flood": flooded}
    echo_figures(both if as_json else None, [f"slow clients ({date})"])
    echo_figures(None, slow_clients.summary(slow), indent="  ")
    echo_figures(None, ["flood of bad signatures"])
    echo_figures(None, flood.summary(flooded), indent="  ")


if __name__ == "__main__":
    main()
