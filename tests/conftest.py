"""Test-suite wiring: every ``covers`` marker must name a requirement of the catalogue."""

import pytest

from ctxspec.catalogue import load_catalogue

pytest_plugins = ["pytester"]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    known = {requirement.id for requirement in load_catalogue()}
    unknown = sorted({(rid, item.nodeid) for item in items
                      for marker in item.iter_markers("covers") for rid in marker.args
                      if rid not in known})
    if unknown:
        listed = "\n".join(f"  {rid} in {nodeid}" for rid, nodeid in unknown)
        raise pytest.UsageError(f"covers() names requirements the catalogue does not have:\n"
                                f"{listed}")
