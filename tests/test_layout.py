"""The package layout of docs/architecture.md: one import name, the four parts as real files in a
wheel, the data (catalogue, schemas) shipped with it, and no citation outside the repository."""

import functools
import os
import re
import subprocess
import sys
import tomllib
import zipfile
from importlib import metadata
from pathlib import Path

import pytest

from tests.browser import INSTALL as BROWSER_INSTALL

ROOT = Path(__file__).resolve().parent.parent


def test_links_point_at_the_top_level_folders() -> None:
    for part in ("reference", "conformance", "models", "spec"):
        link = ROOT / "ctxspec" / part
        assert link.is_symlink(), part
        assert link.resolve() == (ROOT / part).resolve()


def test_parts_import_through_ctxspec_only(tmp_path: Path) -> None:
    # Outside the checkout (pytest puts the checkout itself on sys.path), the installed
    # distribution offers ctxspec.reference but no top-level 'reference', 'models' or
    # 'conformance' that could collide with a user's own modules.
    script = ("import importlib.util as u, ctxspec.reference.budget as b; print(b.__file__); "
              "print([n for n in ('reference', 'models', 'conformance') if u.find_spec(n)])")
    result = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, check=True,
                            capture_output=True, text=True)
    module_file, top_level = result.stdout.splitlines()
    assert Path(module_file).resolve() == (ROOT / "reference" / "budget.py").resolve()
    assert top_level == "[]"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation",
                    "--outdir", str(out), str(ROOT)],
                   check=True, capture_output=True, text=True)
    (built,) = out.glob("ctxspec-*.whl")
    return built


@pytest.mark.slow  # builds a wheel
def test_wheel_holds_the_parts_as_real_files(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        infos = {info.filename: info for info in archive.infolist()}
    expected = ["ctxspec/reference/budget.py", "ctxspec/reference/contracts.py",
                "ctxspec/reference/tokens.py", "ctxspec/conformance/__init__.py",
                "ctxspec/models/__init__.py", "ctxspec/spec/requirements.toml",
                "ctxspec/spec/schemas/UserInput.json", "ctxspec/py.typed",
                "ctxspec/spec/examples/tool-batch-hook.json",
                "ctxspec/spec/vectors/ROW-02.json"]
    for name in expected:
        assert name in infos, name
        # A symlink in a zip has S_IFLNK (0o120000) in the high bits of external_attr.
        mode = infos[name].external_attr >> 16
        assert mode & 0o170000 != 0o120000, f"{name} is a symlink in the wheel"
        assert infos[name].file_size > 0 or name.endswith("py.typed"), name
    assert not any(name.startswith(("tests/", "reference/", "models/", "adapters/"))
                   or "node_modules" in name for name in infos)  # the npm packages stay out


@pytest.mark.slow  # builds a wheel
def test_wheel_installs_and_runs_without_the_checkout(wheel: Path, tmp_path: Path) -> None:
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--quiet",
                    "--target", str(target), str(wheel)], check=True, capture_output=True)
    # The conformance cases read the worked examples the wheel carries, not the checkout's.
    script = ("import ctxspec.reference.budget as b, ctxspec.catalogue as c; "
              "import ctxspec.conformance.cases as k; "
              "print(b.__file__); print(len(c.load_catalogue())); print(len(k.CASES))")
    result = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, check=True,
                            capture_output=True, text=True,
                            env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin"})
    module_file, count, cases = result.stdout.split()
    assert module_file.startswith(str(target))
    assert int(count) > 0 and int(cases) > 0


def _distribution(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def dev_only_modules() -> list[str]:
    """Top-level import names of the distributions only the ``dev`` extra brings (pytest,
    mypy, crosshair, …): what the models may not need."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]
    extras = project["optional-dependencies"]

    def names(requirements: list[str]) -> set[str]:
        return {_distribution(re.split(r"[<>=!~\[; ]", r, maxsplit=1)[0]) for r in requirements}

    allowed = names(project["dependencies"]) | names(extras["models"])
    dev_only = names(extras["dev"]) - allowed
    return sorted(module for module, dists in metadata.packages_distributions().items()
                  if {_distribution(d) for d in dists} & dev_only
                  and not {_distribution(d) for d in dists} & allowed)


@pytest.mark.slow  # builds a wheel
def test_the_models_import_from_the_wheel_with_only_their_extra(wheel: Path,
                                                                tmp_path: Path) -> None:
    # docs/models.md offers the machines to a runtime team that installs ctxspec[models]: no
    # module of models/ (nor what it imports) may need pytest or another dev-only tool.
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--quiet",
                    "--target", str(target), str(wheel)], check=True, capture_output=True)
    blocked = dev_only_modules()
    assert "pytest" in blocked and "hypothesis" not in blocked
    script = (f"import sys\nfor name in {blocked!r}: sys.modules.setdefault(name, None)\n"
              "try:\n    import pytest\nexcept ImportError:\n    print('pytest blocked')\n"
              "import ctxspec.models.delivery_machine, ctxspec.models.effective_machine\n"
              "import ctxspec.models.episode_machine, ctxspec.models.driver_machine as d\n"
              "from ctxspec.conformance.driver import ReferenceDriver\n"
              "print(d.machine(ReferenceDriver).TestCase.__name__, d.__file__)\n")
    result = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True,
                            text=True, env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, result.stderr
    blocked_line, made = result.stdout.splitlines()
    assert blocked_line == "pytest blocked"
    assert made.endswith(".TestCase " + str(target / "ctxspec" / "models" / "driver_machine.py"))


def test_ci_runs_the_readme_check_command_word_for_word() -> None:
    readme = (ROOT / "README.md").read_text("utf-8")
    run_it = readme[readme.index("## Run it"):]  # the quick starts above are the wheel test's
    blocks = run_it.split("```sh\n")[1:]
    commands = [block.split("\n```")[0].strip() for block in blocks]
    assert len(commands) == 2, "\"Run it\" gives exactly two commands"
    check = commands[1].splitlines()  # the install line, then the test line
    ci_lines = (ROOT / ".ci" / "run").read_text("utf-8").splitlines()
    assert [line for line in ci_lines if line in check] == check and ci_lines[-1] == check[-1], \
        "CI runs the README's lines word for word, in order, the test line last"
    install = [line for line in ci_lines if BROWSER_INSTALL in line]
    assert len(install) == 1 and f"`{BROWSER_INSTALL}`" in readme, \
        "the README names the browser the page tests need, as CI installs it"


def test_the_metadata_names_its_licence_and_no_home_it_does_not_have() -> None:
    # Q421: an SPDX expression with its file, and no project URL while the repository names no
    # public home (an invented address would be a citation no reader can follow).
    project = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]
    assert project["license"] == "Apache-2.0" and project["license-files"] == ["LICENSE"]
    assert (ROOT / "LICENSE").read_text("utf-8").lstrip().startswith("Apache License")
    assert not any(c.startswith("License ::") for c in project["classifiers"]), \
        "PEP 639: the licence is the SPDX expression, never a classifier beside it"
    assert "urls" not in project, "a project URL needs a public home the repository names"


# --- no citation outside the repository ------------------------------------------------------

PROJECT_PARTS = ("README.md", "pyproject.toml", ".ci", "docs", "spec", "reference", "conformance",
                 "models", "tests")
"""The repository's own files (``ctxspec/`` holds links to these folders and its own modules);
build output, virtual environments and caches are not the project's."""

UPPER_DOC = re.compile(r"(?<![\w/.-])([A-Z][A-Z0-9_-]+\.md)\b")
"""A document named like README.md: it must be a file of the repository."""
IN_REPO = re.compile(r"(?<![\w/.-])((?:docs|spec)/[\w./-]*\.(?:md|toml|json|py))\b")
"""A path into the repository's docs or spec: it must exist."""
MACHINE = re.compile(r"(?<![\w.~/:-])(/(?:work|home|root|Users|mnt|srv|opt|var)/[\w./-]*)")
"""A path on some machine's disk (never a citation a reader of the project can follow)."""
UPWARD = re.compile(r"(?<![\w.-])((?:\.\./)+[\w./-]*)")
"""A relative path that may climb out of the repository."""


@functools.cache
def project_files() -> tuple[Path, ...]:
    files = [ROOT / "ctxspec" / name for name in sorted(os.listdir(ROOT / "ctxspec"))
             if name.endswith(".py")]
    for part in PROJECT_PARTS:
        path = ROOT / part
        files.extend([path] if path.is_file() else sorted(
            p for p in path.rglob("*") if p.is_file() and (p.suffix in (".py", ".md", ".toml")
                                                             or p.parent.name == ".ci")
            and "__pycache__" not in p.parts and "vectors" not in p.parts))
    return tuple(files)


def outside_citations(path: Path, text: str) -> list[str]:
    """What ``text`` (the content of ``path``) cites that is not in the repository."""
    names = {p.name for p in project_files()}
    found = [f"{doc} (no such file in the repository)" for doc in UPPER_DOC.findall(text)
             if doc not in names]
    found += [f"{cited} (no such path)" for cited in IN_REPO.findall(text)
              if not (ROOT / cited).exists()]
    found += [f"{cited} (a machine path)" for cited in MACHINE.findall(text)]
    found += [f"{cited} (outside the repository)" for cited in UPWARD.findall(text)
              if not (path.parent / cited).resolve().is_relative_to(ROOT)]
    return found


def test_no_project_file_cites_anything_outside_the_repository() -> None:
    # A reader of the project can follow every citation: team notes, a sibling checkout or a
    # path on the author's machine are not part of it (docs/architecture.md, "Invariants").
    cited = [f"{path.relative_to(ROOT)}: {what}" for path in project_files()
             for what in outside_citations(path, path.read_text("utf-8"))]
    assert cited == [], "project files cite what is not in the repository:\n" + "\n".join(cited)


@pytest.mark.parametrize("text", [
    "see " + "ARCHITECTURE" + ".md for the layout",
    "as " + "docs/" + "nowhere.md says",
    "read " + "/work" + "/shared/notes.txt",
    "the guide in " + ".." + "/../shared/guide.md",
])
def test_the_citation_rule_sees_each_kind(text: str) -> None:
    # The rule above would pass vacuously if its patterns matched nothing: each kind of outside
    # citation is caught, and a citation of a file that is here is not.
    assert outside_citations(ROOT / "docs" / "x.md", text) != []
    assert outside_citations(ROOT / "docs" / "x.md",
                             "see README.md and docs/architecture.md") == []
