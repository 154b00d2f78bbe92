"""CrossHair proves every PEP 316 condition of the pure integer arithmetic: the §7 budget and
§8 target size, and the §8 chunk capacity of a compaction request."""

import importlib
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.slow  # a proof: seconds to minutes per module
@pytest.mark.covers("CTX-7.5", "CTX-7.6", "CTX-7.12", "CTX-8.43", "CTX-8.68")
@pytest.mark.parametrize("module", ["ctxspec.reference.budget", "ctxspec.reference.compaction"])
def test_crosshair_confirms_every_condition(module: str) -> None:
    source = Path(importlib.import_module(module).__file__ or "").read_text("utf-8")
    conditions = sum(1 for line in source.splitlines() if line.strip().startswith("post:"))
    assert conditions > 0
    result = subprocess.run(
        [sys.executable, "-m", "crosshair", "check", "--report_all",
         "--per_condition_timeout=60", "--per_path_timeout=20", module],
        capture_output=True, text=True, timeout=600, check=False)
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    confirmed = [line for line in lines if line.endswith("info: Confirmed over all paths.")]
    others = [line for line in lines if line not in confirmed]
    assert result.returncode == 0, result.stdout + result.stderr
    assert not others, "unconfirmed or failing conditions:\n" + "\n".join(others)
    assert len(confirmed) == conditions, (len(confirmed), conditions, result.stdout)
