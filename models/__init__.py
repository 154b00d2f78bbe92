"""Hypothesis state-machine models of the design's invariants."""
