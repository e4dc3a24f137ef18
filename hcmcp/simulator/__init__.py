"""An in-process Healthchecks instance for --demo, the tests and the benchmarks (no account, no network)."""
