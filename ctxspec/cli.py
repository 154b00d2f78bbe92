"""Command-line entry point: ``ctxspec budget | trace | schemas | contracts | vectors | replay |
stdio-driver |
conformance | compat | mutants``; each group of commands is a module of ``ctxspec/commands/``.

Exit codes: 0 for every evaluation (an error verdict of the design is a result, not a failure
of the tool); 2 for invalid arguments or configuration, with a message naming the field.
"""

import click

from ctxspec.commands.budget import budget
from ctxspec.commands.published import contracts_command, schemas_command, vectors_command
from ctxspec.commands.replay import replay_command, stdio_driver_command
from ctxspec.commands.suite import compat_command, conformance_command, mutants_command
from ctxspec.commands.trace import trace_command


@click.group()
@click.version_option(package_name="ctxspec")
def main() -> None:
    """ctxspec: executable specification of the Session, Context and Compaction design."""


for command in (budget, trace_command, schemas_command, contracts_command, vectors_command,
                replay_command,
                stdio_driver_command, conformance_command, compat_command, mutants_command):
    main.add_command(command)

__all__ = ["budget", "main"]
