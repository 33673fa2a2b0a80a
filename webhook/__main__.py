"""``python -m podgang.webhook``: the same as ``podgang webhook``."""

import argparse
import sys

from podgang.webhook import cli


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m podgang.webhook", description=(cli.__doc__ or "").strip())
    cli.add_arguments(parser)
    return cli.run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
