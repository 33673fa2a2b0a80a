"""The ``podgang`` console script: one entry point, one sub-command per process.

Each sub-command's module exposes two functions: ``add_arguments(parser)`` and
``run(args) -> int``.
"""

from __future__ import annotations

import argparse
import sys
from types import ModuleType

from podgang import __version__, plan_cli
from podgang.certs import cli as certs_cli
from podgang.grouper import cli as grouper_cli
from podgang.webhook import cli as webhook_cli

# sub-command -> (module, one-line help)
SUBCOMMANDS: dict[str, tuple[ModuleType, str]] = {
    "plan": (plan_cli, "offline: show the gangs, PodGroups and denials for manifests"),
    "webhook": (webhook_cli, "serve admission (mutate + validate pods) over HTTPS"),
    "grouper": (grouper_cli, "run the controller that keeps PodGroups and gangs true"),
    "certs": (certs_cli, "generate, store and rotate the webhook's serving certificates"),
}


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser: lists the sub-commands without importing them."""
    parser = argparse.ArgumentParser(
        prog="podgang",
        description="Gang scheduling for Kubernetes: every pod in the right gang, every gang the right size.",
        epilog="Run 'podgang COMMAND --help' for a command's flags.",
    )
    parser.add_argument("--version", action="version", version=f"podgang {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.required = True
    for name, (_module, help_text) in SUBCOMMANDS.items():
        commands.add_parser(name, help=help_text, add_help=False)
    return parser


def command_parser(name: str):
    """The parser of one sub-command and the function that runs it."""
    module, help_text = SUBCOMMANDS[name]
    parser = argparse.ArgumentParser(
        prog=f"podgang {name}",
        description=(module.__doc__ or help_text).strip(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    module.add_arguments(parser)
    return parser, module.run


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in SUBCOMMANDS:
        build_parser().parse_args(argv)  # prints help, the version, or a usage error
        return 2
    parser, run = command_parser(argv[0])
    args = parser.parse_args(argv[1:])
    try:
        return int(run(args) or 0)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
