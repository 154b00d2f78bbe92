"""What the second-mapping tests (tests/test_agents_second_mapping.py,
tests/test_langchain_second_mapping.py) compare against: an adapter's checked-in verdicts,
which tests/test_compat_reports.py keeps equal to a fresh run, so the adapter's own mapping
need not run again beside the second one."""

import json
from pathlib import Path

FOLDER = Path(__file__).resolve().parent.parent / "docs" / "compatibility"


def reported(runtime: str) -> dict[str, str]:
    """A checked-in report's verdict per case (best configuration); a pass on what the
    adapter supplies reads as the pass a run gives (the report only counts it apart)."""
    cases: dict[str, str] = json.loads((FOLDER / f"{runtime}.json").read_text("utf-8"))["cases"]
    return {case: "passed" if status == "adapter" else status
            for case, status in cases.items()}
