"""The ``podgang`` console script: one entry point, one sub-command per process.

Each sub-command's module exposes two functions: ``add_arguments(parser)`` and
``run(args) -> int``.
"""

from __future__ import annotations

import argparse
import sys
from types import ModuleType

from podgang import __version__, plan_cli, status_cli
from podgang.certs import cli as certs_cli
from podgang.grouper import cli as grouper_cli
from podgang.webhook import cli as webhook_cli

# sub-command -> (module, one-line help)
SUBCOMMANDS: dict[str, tuple[ModuleType, str]] = {
    "plan": (plan_cli, "offline: show the gangs, PodGroups and denials for manifests"),
    "status": (status_cli, "every gang in the cluster: size, members, staleness, the scheduler's verdict"),
    "webhook": (webhook_cli, "serve admission (mutate + validate pods) over HTTPS"),
    "grouper": (grouper_cli, "run the controller that keeps PodGroups and gangs true"),
    "certs": (certs_cli, "generate, store and rotate the webhook's serving certificates"),
}


#: what ``kubectl podgang`` offers: the commands for a user's own kubeconfig
PLUGIN_COMMANDS = ("status", "plan")


class Parser(argparse.ArgumentParser):
    """A usage error is the error and where to read more, not the whole usage again."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\nRun '{self.prog} --help' for usage.\n")


def _has_subcommands(parser: argparse.ArgumentParser) -> bool:
    return any(isinstance(a, argparse._SubParsersAction) for a in parser._actions)


def build_parser(prog: str = "podgang", names=tuple(SUBCOMMANDS)) -> argparse.ArgumentParser:
    """The top-level parser: lists the sub-commands."""
    parser = Parser(
        prog=prog,
        description="Gang scheduling for Kubernetes: every pod in the right gang, every gang the right size.",
        epilog=f"Run '{prog} COMMAND --help' for a command's flags.",
    )
    parser.add_argument("--version", action="version", version=f"podgang {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.required = True
    for name in names:
        commands.add_parser(name, help=SUBCOMMANDS[name][1], add_help=False)
    return parser


def command_parser(name: str, prog: str = "podgang"):
    """The parser of one sub-command and the function that runs it."""
    module, help_text = SUBCOMMANDS[name]
    parser = Parser(
        prog=f"{prog} {name}",
        description=(module.__doc__ or help_text).strip(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    module.add_arguments(parser)
    return parser, module.run


def main(argv: list[str] | None = None, prog: str = "podgang", names=tuple(SUBCOMMANDS)) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in names:
        build_parser(prog, names).parse_args(argv)  # prints help, the version, or a usage error
        return 2
    parser, run = command_parser(argv[0], prog)
    # flags and files in any order (`plan a.yaml -o json b.yaml`), as kubectl takes them
    parse = parser.parse_args if _has_subcommands(parser) else parser.parse_intermixed_args
    args = parse(argv[1:])
    try:
        return int(run(args) or 0)
    except KeyboardInterrupt:
        return 130


def kubectl_plugin(argv: list[str] | None = None) -> int:
    """The ``kubectl-podgang`` console script: ``kubectl podgang status ...`` runs it
    with ``status ...``."""
    return main(argv, prog="kubectl podgang", names=PLUGIN_COMMANDS)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
