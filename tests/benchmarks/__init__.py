"""Benchmark scripts (run as programs) and the helpers they and a few tests share."""
