"""podgang: every pod in the right gang, every gang the right size.

The grouping rules live in :mod:`podgang.rules` (pure functions, no I/O); each
gang scheduler's spelling in one module of :mod:`podgang.backends`; each workload
kind in one entry of :mod:`podgang.kinds`; configuration as plain data in
:mod:`podgang.settings`. docs/architecture.md draws the whole picture.
"""

__version__ = "0.1.0"
