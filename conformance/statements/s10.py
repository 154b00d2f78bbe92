"""Conformance cases for normative statements of §10 outside the §12 table and the worked
examples (IDs ``S10-<name>``): each a scenario and a predicate over the neutral trace, its
expected values derived by hand from the design (see conformance/case.py)."""

from ctxspec.conformance.case import Case

CASES: tuple[Case, ...] = ()
