"""Conformance suite: driver protocol, harness and the §12 cases."""
