"""The ``podgang`` console script: one entry point, one sub-command per process.

Each sub-command lives in its own package and exposes two functions:
``add_arguments(parser)`` (cheap: no heavy imports) and ``run(args) -> int``.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from podgang import __version__

# sub-command -> (module, one-line help)
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "plan": ("podgang.plan_cli", "offline: show the gangs, PodGroups and denials for manifests"),
    "webhook": ("webhook.cli", "serve admission (mutate + validate pods) over HTTPS"),
    "grouper": ("grouper.cli", "run the controller that keeps PodGroups and gangs true"),
    "certs": ("certs.cli", "generate, store and rotate the webhook's serving certificates"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="podgang",
        description="Gang scheduling for Kubernetes: every pod in the right gang, every gang the right size.",
    )
    parser.add_argument("--version", action="version", version=f"podgang {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.required = True
    for name, (module_name, help_text) in SUBCOMMANDS.items():
        module = importlib.import_module(module_name)
        sub = commands.add_parser(name, help=help_text, description=(module.__doc__ or help_text).strip())
        module.add_arguments(sub)
        sub.set_defaults(_run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args._run(args) or 0)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
