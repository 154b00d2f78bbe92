"""``ctxspec schemas``, ``ctxspec contracts`` and ``ctxspec vectors``: the files the project
publishes under spec/ (the JSON Schemas of the contracts, the hook registry and trace fields,
the golden vectors of the cases), written or checked for drift; ``vectors --replay`` runs a
folder of vectors against a driver."""

import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import click

from ctxspec import catalogue, schemas
from ctxspec.commands.options import out_folder

# --- where the published files go --------------------------------------------------------


def checkout_spec(option: str | None) -> Path:
    """The checkout's spec/ folder, where a command writes by default: only when ctxspec runs
    from a checkout (its ``ctxspec/spec`` is the link to the top-level folder, an editable
    install); from an installed wheel nothing is written into the installed package, and a
    command that would is a usage error naming the option that says where (Q422)."""
    spec = catalogue.package_root() / "spec"
    if spec.is_symlink() and (catalogue.package_root().parent / "pyproject.toml").is_file():
        return spec
    where = f"; give {option} FOLDER to say where to write" if option else ""
    raise click.UsageError(f"ctxspec is installed, not run from its checkout: it writes no file "
                           f"into the installed package{where}")


# --- schemas -----------------------------------------------------------------------------


def exit_if_drifted(stale: Sequence[str], what: str, command: str) -> None:
    """A ``--check`` that found published files differing from their source: say which and
    how to write them again, and exit 1."""
    if stale:
        click.echo(f"{what}: {', '.join(stale)}; run `ctxspec {command}` and commit", err=True)
        sys.exit(1)


@click.command("schemas")
@click.option("--check", is_flag=True, help="Exit 1 if spec/schemas/ differs from the models.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path),
              help="Directory to write (default: spec/schemas of the checkout ctxspec runs "
                   "from; required when it is installed from a wheel).")
def schemas_command(check: bool, out: Path | None) -> None:
    """Write (or check) the JSON Schemas of the data contracts."""
    if check:
        directory = out or catalogue.package_root() / "spec" / "schemas"
        exit_if_drifted(schemas.drifted(directory), "schemas differ from the models",
                        "schemas")
        click.echo(f"{len(schemas.published_schemas())} schemas match the models")
        return
    directory = out or checkout_spec("--out") / "schemas"
    if out is not None:
        out_folder(out, "--out")
    try:
        written = schemas.write(directory)
    except OSError as error:
        raise click.ClickException(f"--out {directory}: {error.strerror or error}") from error
    click.echo(f"wrote {len(written)} schemas to {directory}")


# --- contracts ---------------------------------------------------------------------------


@click.command("contracts")
@click.option("--check", is_flag=True,
              help="Exit 1 if spec/hooks.json, spec/trace-fields.json or "
                   "spec/estimators-tokenizer.json differs from the reference's registries, "
                   "the cases' reads and tiktoken's counts.")
def contracts_command(check: bool) -> None:
    """Write (or check) the contracts a driver meets as data: the hook registry
    (spec/hooks.json, from the reference's field registries), the trace contract field by
    field with the cases that read each optional field (spec/trace-fields.json), and the
    tokenizer estimator's vectors (spec/estimators-tokenizer.json, counted with tiktoken)."""
    from ctxspec import contracts

    spec = catalogue.package_root() / "spec"
    if check:
        exit_if_drifted(contracts.drifted(spec), "contracts differ from the reference",
                        "contracts")
        click.echo(f"{len(contracts.DOCUMENTS)} contract documents match the reference")
        return
    spec = checkout_spec(None)
    written = contracts.write(spec)
    click.echo(f"wrote {', '.join(written)} to {spec}")


# --- vectors -----------------------------------------------------------------------------


@click.command("vectors")
@click.option("--check", is_flag=True, help="Exit 1 if spec/vectors/ differs from the cases.")
@click.option("--replay", "replay_dir", type=click.Path(exists=True, file_okay=False,
                                                       path_type=Path),
              help="Replay the vectors of this directory against --driver instead.")
@click.option("--driver", "driver_spec", metavar="MODULE:FACTORY",
              help="The driver to replay against (default: the reference runtime).")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path),
              help="Directory to write the vectors into (default: spec/vectors of the checkout "
                   "ctxspec runs from; required when it is installed from a wheel).")
def vectors_command(check: bool, replay_dir: Path | None, driver_spec: str | None,
                    out: Path | None) -> None:
    """Write the golden vectors (scenario, the reference's observations, a manifest) into
    spec/vectors/ (or --out), check them for drift, or replay a directory of them against a
    driver."""
    from ctxspec.conformance.driver import ReferenceDriver
    from ctxspec.conformance.harness import load_factory
    from ctxspec.conformance.vectors import VECTORS, drifted, generate, replay

    if replay_dir is not None:
        try:
            factory = load_factory(driver_spec)
        except (ValueError, ImportError) as error:
            raise click.UsageError(str(error)) from error
        if not any(replay_dir.glob("*.json")):  # nothing read is not a pass
            raise click.UsageError(f"--replay {str(replay_dir)!r}: no *.json vector files")
        results = replay(replay_dir, factory, progress=lambda r: click.echo(
            f"{r.name:<22} {r.status:<11} {r.detail}".rstrip()))
        summary = Counter(r.status for r in results)
        click.echo(f"{len(results)} vectors: " + ", ".join(
            f"{summary.get(s, 0)} {s}" for s in ("passed", "failed", "unsupported", "error",
                                                 "unread")))
        if summary.get("failed") or summary.get("error") or summary.get("unread"):
            sys.exit(1)
        return
    if check:
        exit_if_drifted(drifted(VECTORS, ReferenceDriver), "vectors differ from the cases",
                        "vectors")
        click.echo(f"{len(generate(ReferenceDriver))} vectors match the cases")
        return
    if out is not None:
        out_folder(out, "--out")
    directory = out or checkout_spec("--out") / "vectors"
    directory.mkdir(parents=True, exist_ok=True)
    written = generate(ReferenceDriver)
    if out is None:  # the checkout's own folder: a vector no case generates is retired
        for retired in {p.name for p in VECTORS.glob("*.json")} - written.keys():
            (VECTORS / retired).unlink()
    for name, text in written.items():
        (directory / name).write_text(text, "utf-8")
    click.echo(f"wrote {len(written)} vectors to {directory}")
