#!/usr/bin/env bash
# Mutation testing of the pure reference modules (docs/mutation.md): runs mutmut with the
# [tool.mutmut] configuration of pyproject.toml and prints the score per module. Not part of CI:
# a run takes a few minutes on two cores.
#
#   bash tests/benchmarks/mutation.sh            # fresh run (removes mutants/ first)
#   bash tests/benchmarks/mutation.sh --score    # only print the score of the last run
#   bash tests/benchmarks/mutation.sh --survivors  # also list the mutants that survived
set -euo pipefail
cd "$(dirname "$0")/../.."

if [[ "${1:-}" != "--score" && "${1:-}" != "--survivors" ]]; then
    python3 -m mutmut --version >/dev/null 2>&1 || {
        echo "mutmut is not installed: pip install 'mutmut>=3.8,<4'" >&2; exit 1; }
    # mutmut reuses results whose function hash is unchanged; a changed test would not
    # invalidate them, so a measurement always starts from a clean copy.
    rm -rf mutants
    start=$(date +%s)
    python3 -m mutmut run --max-children "${MUTMUT_CHILDREN:-2}" >"${TMPDIR:-/tmp}/ctxspec-mutmut.log" 2>&1 || {
        tail -n 40 "${TMPDIR:-/tmp}/ctxspec-mutmut.log"; exit 1; }
    echo "mutmut run took $(( $(date +%s) - start )) s (log: ${TMPDIR:-/tmp}/ctxspec-mutmut.log)"
fi

python3 - "${1:-}" <<'PY'
import json
import sys
from collections import Counter
from pathlib import Path

# mutmut's own exit-code classes (mutmut/stats.py): pytest's 1 and 3 kill a mutant, 0 lets it
# survive, 5/33 mean no test reached it, the rest are timeouts.
KILLED, SURVIVED, NO_TESTS = {1, 3}, {0}, {5, 33}
TIMEOUT = {-24, 24, 152, 255, 36}

metas = sorted(Path("mutants/ctxspec/reference").glob("*.py.meta"))
if not metas:
    sys.exit("no mutants/ results: run without --score first")
print(f"{'module':<14}{'killed':>8}{'timeout':>9}{'survived':>10}{'no tests':>10}{'total':>7}"
      f"{'score':>9}")
survivors = []
for meta in metas:
    codes = json.loads(meta.read_text("utf-8"))["exit_code_by_key"]
    counts = Counter()
    for key, code in codes.items():
        if code in KILLED:
            counts["killed"] += 1
        elif code in TIMEOUT:
            counts["timeout"] += 1
        elif code in SURVIVED:
            counts["survived"] += 1
            survivors.append(key)
        elif code in NO_TESTS:
            counts["no tests"] += 1
            survivors.append(key)
        else:
            counts["other"] += 1
            survivors.append(key)
    total = len(codes)
    # A timeout is a detected mutant (the mutated code loops where the original ends), so it
    # counts as killed in the score.
    detected = counts["killed"] + counts["timeout"]
    score = f"{100 * detected / total:.1f}%" if total else "-"
    print(f"{meta.name.removesuffix('.py.meta'):<14}{counts['killed']:>8}{counts['timeout']:>9}"
          f"{counts['survived']:>10}{counts['no tests']:>10}{total:>7}{score:>9}")
if sys.argv[1] == "--survivors":
    print("\n".join(sorted(survivors)))
PY
