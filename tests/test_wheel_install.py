"""The wheel-first install path (issue #36): the built wheel, installed with its ``langchain``
extra into a fresh virtual environment, runs the conformance suite and replays a shipped example
and a failing case far from the checkout, and writes nothing into the installed package (the
vectors and schemas go only where ``--out`` says)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LANGCHAIN = "ctxspec.adapters.langchain:make_driver"


def _run(command: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True,
                          check=False, timeout=600)


def quick_starts() -> list[str]:
    """The commands of the README's "Quick starts", in order (each ```sh block's lines)."""
    text = (ROOT / "README.md").read_text("utf-8")
    part = text[text.index("## Quick starts"):text.index("## Run it")]
    return [line for block in part.split("```sh\n")[1:]
            for line in block.split("```")[0].splitlines() if line.strip()]


def _files(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")
            if "__pycache__" not in p.parts}


@pytest.mark.slow  # builds a wheel and installs it with LangChain into a new environment
@pytest.mark.first
def test_the_wheel_installs_with_its_extra_and_runs_outside_the_checkout(tmp_path: Path) -> None:
    built = _run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir",
                  str(tmp_path / "dist"), str(ROOT)], ROOT, dict(os.environ))
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = (tmp_path / "dist").glob("ctxspec-*.whl")
    venv = tmp_path / "venv"
    made = _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], tmp_path,
                dict(os.environ))
    assert made.returncode == 0, made.stderr
    uv = Path(sys.executable).parent / "uv"  # the README's install line puts it beside pytest
    installed = _run([str(uv), "pip", "install", "--quiet", "--python",
                      str(venv / "bin" / "python"), f"{wheel}[langchain]"], tmp_path,
                     dict(os.environ))
    assert installed.returncode == 0, installed.stderr[-2000:]
    away = tmp_path / "elsewhere"
    away.mkdir()
    env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": str(tmp_path)}
    package = next((venv / "lib").glob("python3*/site-packages/ctxspec"))
    before = _files(package)

    reference = _run(["ctxspec", "conformance", "--case", "ROW-01"], away, env)
    assert reference.returncode == 0, reference.stdout + reference.stderr
    assert "1 cases in" in reference.stdout and "1 passed" in reference.stdout
    failing = _run(["ctxspec", "conformance", "--case", "ROW-01", "--driver", LANGCHAIN], away,
                   env)
    assert failing.returncode == 1 and "CTX-5.14: " in failing.stdout, failing.stdout
    replay = f"ctxspec replay ROW-01 --driver {LANGCHAIN} --compare --html ROW-01.html"
    assert f"replay: {replay}" in failing.stdout
    compared = _run(replay.split(), away, env)
    assert compared.returncode == 0 and (away / "ROW-01.html").is_file(), compared.stderr
    example = _run(["ctxspec", "replay", "--example", "supplements-across-runs"], away, env)
    assert example.returncode == 0 and example.stdout.startswith(
        "scenario supplements-across-runs: "), example.stderr

    # The README's quick starts, as a new user types them, from the wheel alone: a case that
    # fails on LangChain is the runtime team's point, so conformance may exit 1 with a verdict.
    started = quick_starts()
    assert len(started) == 5 and all(c.startswith("ctxspec ") for c in started), started
    (away / "quick").mkdir()
    for typed in started:
        ran = _run(typed.split(), away / "quick", env)
        judged = typed.startswith("ctxspec conformance") and ran.returncode == 1 \
            and "cases in" in ran.stdout
        assert ran.returncode == 0 or judged, f"{typed}: {ran.stdout[-800:]}{ran.stderr}"
    assert {"ROW-01.html", "compaction.html", "vectors"} <= {
        p.name for p in (away / "quick").iterdir()}

    for command in (["vectors"], ["schemas"]):  # nowhere to write without --out
        refused = _run(["ctxspec", *command], away, env)
        assert refused.returncode == 2 and "give --out FOLDER" in refused.stderr, refused.stderr
    wrote = _run(["ctxspec", "vectors", "--out", "vectors"], away, env)
    assert wrote.returncode == 0, wrote.stderr
    shipped = {p.name for p in (ROOT / "spec" / "vectors").glob("*.json")}
    assert {p.name for p in (away / "vectors").glob("*.json")} == shipped
    assert _run(["ctxspec", "schemas", "--out", "schemas"], away, env).returncode == 0
    assert {p.name for p in (away / "schemas").glob("*.json")} == {
        p.name for p in (ROOT / "spec" / "schemas").glob("*.json")}
    assert _files(package) == before  # nothing written into the installed package
