"""Where the suite finds things: the repository and the tests' own folder (fixtures,
corpus), wherever in the tiers a test module sits."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
