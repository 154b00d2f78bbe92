"""Conformance cases for the design's normative statements outside the §12 acceptance table
and the worked examples, one module per section (IDs ``S<section>-<name>``)."""

from ctxspec.conformance.case import Case
from ctxspec.conformance.statements import (
    moments,
    paths,
    results,
    s1,
    s2,
    s3,
    s4,
    s5,
    s6,
    s6_groups,
    s7,
    s8,
    s8_stopped_call,
    s8_summary,
    s9,
    s10,
    s11,
    stop_retry,
    workflow,
)

STATEMENTS: tuple[Case, ...] = (*s1.CASES, *s2.CASES, *s3.CASES, *s4.CASES, *s5.CASES,
                                *s6.CASES, *s6_groups.CASES, *s7.CASES, *s8.CASES,
                                *s8_summary.CASES, *s8_stopped_call.CASES,
                                *s9.CASES, *s10.CASES,
                                *s11.CASES, *stop_retry.CASES, *workflow.CASES, *paths.CASES,
                                *moments.CASES, *results.CASES)

__all__ = ["STATEMENTS"]
