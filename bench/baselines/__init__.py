"""The naive receiver the benchmarks compare against: what a webhook endpoint usually looks like."""
