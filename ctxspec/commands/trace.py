"""``ctxspec trace``: the traceability matrix of the requirement catalogue."""

import json
from collections import Counter
from dataclasses import asdict

import click

from ctxspec import catalogue
from ctxspec.commands.options import Count

# --- trace -------------------------------------------------------------------------------


@click.command("trace")
@click.option("--json", "as_json", is_flag=True,
              help="Print a list of objects: id, section, level, status, covered_by, ...")
@click.option("--summary", is_flag=True, help="Print only the counts per section.")
@click.option("--section", "only_section", type=Count(1, 11),
              help="Print the matrix of this section only.")
@click.option("--matrix", "matrix_of", metavar="ID",
              help="Print which points of the hook matrix pin this requirement.")
def trace_command(as_json: bool, summary: bool, only_section: int | None,
                  matrix_of: str | None) -> None:
    """The traceability matrix: each requirement, the conformance cases and tests that pin it,
    and its status (conformance, unit, not_testable, uncovered); then the counts per section."""
    try:
        requirements = catalogue.load_catalogue()
    except catalogue.CatalogueError as error:
        raise click.ClickException(str(error)) from error
    declarations, tests_found = catalogue.scan_declarations()
    unknown = catalogue.unknown_ids(declarations, requirements)
    if unknown:
        listed = ", ".join(f"{rid} in {where}" for rid, where in unknown)
        raise click.ClickException(f"coverage declared for unknown requirement IDs: {listed}")
    rows = catalogue.trace(requirements, declarations)
    if not tests_found:
        click.echo("note: no tests/ directory beside the package (not a checkout); unit "
                   "coverage is not shown", err=True)
    if as_json:
        click.echo(json.dumps([asdict(row) for row in rows], indent=2, ensure_ascii=False))
        return
    if matrix_of is not None:
        chosen = [row for row in rows if row.id == matrix_of]
        if not chosen:
            raise click.ClickException(f"no requirement {matrix_of} in the catalogue")
        _print_matrix(chosen[0])
        return
    if not summary:
        for row in rows:
            if only_section is None or row.section == only_section:
                click.echo(f"{row.id:<10} {row.status:<13} {_pinned_by(row)}")
        click.echo()
    statuses: tuple[catalogue.Status, ...] = ("conformance", "unit", "not_testable", "uncovered")
    click.echo(f"{'section':<8}{'total':>6}" + "".join(f"{s:>14}" for s in statuses))
    totals: Counter[catalogue.Status] = Counter()
    for section in catalogue.SECTIONS:
        counts = Counter(row.status for row in rows if row.section == section)
        total = sum(counts.values())
        totals.update(counts)
        click.echo(f"§{section:<7}{total:>6}" + "".join(f"{counts[s]:>14}" for s in statuses))
    click.echo(f"{'all':<8}{len(rows):>6}" + "".join(f"{totals[s]:>14}" for s in statuses))


def _print_matrix(row: catalogue.TraceRow) -> None:
    """A requirement's hook matrix as a grid — a row per hook point and decision, a column per
    role and ending, "✓" where a case pins that point for some kind of call and scope, "·"
    where none does — then the cases."""
    from ctxspec.conformance.matrix import DIMENSIONS, SHORT

    cells = {(p["point"], p["decision"], p["role"], p["ending"]) for p in row.matrix}
    space = 1
    for values in DIMENSIONS.values():
        space *= len(values)
    click.echo(f"{row.id} {row.status}: {row.statement}")
    click.echo(f"hook matrix: {len(row.matrix)} of {space} points pinned "
               f"({' × '.join(DIMENSIONS)})")
    if not cells:
        return
    columns = [(role, ending) for role in DIMENSIONS["role"] for ending in DIMENSIONS["ending"]]
    click.echo(f"{'':<14}" + "".join(f"{role[:4]:>10}" for role, _ in columns))
    click.echo(f"{'':<14}" + "".join(f"{ending:>10}" for _, ending in columns))
    for point in DIMENSIONS["point"]:
        for decision in DIMENSIONS["decision"]:
            marks = ["✓" if (point, decision, role, ending) in cells else "·"
                     for role, ending in columns]
            click.echo(f"{SHORT[point] + ' ' + decision:<14}" + "".join(
                f"{mark:>10}" for mark in marks))
    click.echo("pinned by: " + ", ".join(sorted(p["case"] for p in row.matrix)))


def _pinned_by(row: catalogue.TraceRow) -> str:
    """The cases by ID (the crash matrix as one entry), then how many unit tests; or why none
    can pin it."""
    if row.status == "not_testable":
        return f"not testable: {row.not_testable}"
    prefix = "conformance case "
    cases = [c.removeprefix(prefix) for c in row.covered_by if c.startswith(prefix)]
    crashes = [c for c in cases if c.startswith("CRASH-")]
    named = [c for c in cases if not c.startswith(("CRASH-", "HM-"))]
    if crashes:
        named.append(f"crash matrix ({len(crashes)} cases)")
    if row.matrix:
        named.append(f"hook matrix ({len(row.matrix)} points; --matrix {row.id})")
    tests = len(row.covered_by) - len(cases)
    if tests:
        named.append(f"{tests} unit test{'s' if tests > 1 else ''}")
    if row.status == "unit" and row.white_box:
        named.append(f"white box: {row.white_box}")
    return ", ".join(named) or "-"
