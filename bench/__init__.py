"""The benchmark harness: `make bench` (full run) and `make bench-smoke` (a few seconds, in CI).

It creates its own PostgreSQL database, starts gunicorn, the relay and workers
the way the Procfile does, drives them with wrk, measures the naive receiver in
``bench/baselines`` and pgbench's ceiling in the same run, and writes
``bench/results/<date>.json`` and the tables and plot in ``docs/benchmarks.md``.
"""
