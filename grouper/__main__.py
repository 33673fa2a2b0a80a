"""``python -m podgang.grouper``: the same as ``podgang grouper``."""

import sys

from podgang.grouper.cli import main

if __name__ == "__main__":
    sys.exit(main())
