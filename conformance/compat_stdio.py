"""Compatibility reports of a runtime driven over the stdio protocol (issue #37): ``ctxspec
compat --stdio COMMAND --profile FILE``. A runtime in another language cannot carry a Python
``compat_profile``, so what its report says of the framework under it is a JSON file beside it
(``adapters/langchain-js/profile.json``): the same fields as :class:`~ctxspec.conformance.
compat.Profile`, with ``defaults`` the command of the framework-defaults configuration and
``packages`` the npm packages whose installed versions the report names, each read from the
``node_modules`` beside the file (the versions the run used, never a number copied by hand).
"""

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ctxspec.conformance.case import Case
from ctxspec.conformance.compat import Divergence, Finding, Profile, Setting, run_compat
from ctxspec.conformance.replays import STDIO
from ctxspec.conformance.stdio import READ_TIMEOUT, StdioDriver

FIELDS = frozenset({"runtime", "framework", "packages", "adapter_supplied", "divergences",
                    "settings", "doubts", "defaults", "suite_flaws", "findings", "notes"})


class ProfileError(ValueError):
    """A profile file that is not one (its path and the field at fault in the message)."""


def installed_versions(folder: Path, packages: Sequence[str]) -> dict[str, str]:
    """Each package's version as installed in ``folder/node_modules``."""
    versions = {}
    for name in packages:
        manifest = folder / "node_modules" / name / "package.json"
        try:
            versions[name] = str(json.loads(manifest.read_text("utf-8"))["version"])
        except (OSError, ValueError, KeyError) as error:
            raise ProfileError(f"{manifest}: the installed version of {name} cannot be read "
                               f"({error}); install the runtime's packages (npm ci)") from error
    return versions


def load_profile(path: Path) -> Profile:
    """The profile a JSON file states; ``defaults`` becomes the report's ``stdio: COMMAND``."""
    try:
        data = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError) as error:
        raise ProfileError(f"{path}: {error}") from error
    unknown = sorted(set(data) - FIELDS) if isinstance(data, dict) else ["(not an object)"]
    if unknown or not isinstance(data.get("runtime"), str):
        raise ProfileError(f"{path}: unknown fields {unknown} or no runtime name")
    return Profile(
        runtime=data["runtime"], framework=data.get("framework", ""),
        versions=installed_versions(path.parent, data.get("packages", [])),
        adapter_supplied=dict(data.get("adapter_supplied", {})),
        divergences=_divergences(data.get("divergences", {})),
        settings=tuple(Setting(s["name"], s["default"], s["best"], s["why"],
                               frozenset(s["cases"])) for s in data.get("settings", [])),
        doubts=dict(data.get("doubts", {})),
        defaults=f"{STDIO}{data['defaults']}" if data.get("defaults") else "",
        suite_flaws=dict(data.get("suite_flaws", {})),
        findings=tuple(Finding(f["behaviour"], f["source"]) for f in data.get("findings", [])),
        notes=tuple(data.get("notes", [])))


def _divergences(found: Mapping[str, Any]) -> dict[str, Divergence]:
    """Case ID → its divergence; a value that is a string names a shared divergence of the
    file's ``"@name"`` entries (one sentence written once for the cases that show it)."""
    shared = {name: Divergence(d["sentence"], d["source"])
              for name, d in found.items() if name.startswith("@")}
    return {case: shared[d] if isinstance(d, str) else Divergence(d["sentence"], d["source"])
            for case, d in found.items() if not case.startswith("@")}


def run_compat_stdio(command: str, profile_path: Path | None, cases: Sequence[Case], date: str,
                     timeout: float = READ_TIMEOUT) -> dict[str, Any]:
    """The report of the runtime ``command`` starts, over the stdio protocol: one process for
    the best configuration, one for the defaults the profile names."""
    profile = load_profile(profile_path) if profile_path is not None else Profile(
        runtime=Path(command.split()[-1]).stem or "runtime", stated=False)
    with StdioDriver(command, timeout) as best:
        if not profile.defaults:
            return run_compat(lambda: best, f"{STDIO}{command}", cases, date, profile)
        with StdioDriver(profile.defaults[len(STDIO):], timeout) as plain:
            return run_compat(lambda: best, f"{STDIO}{command}", cases, date, profile,
                              lambda: plain)
