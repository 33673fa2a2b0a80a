"""``python -m grouper``: the same as ``podgang grouper``."""

import sys

from grouper.cli import main

if __name__ == "__main__":
    sys.exit(main())
