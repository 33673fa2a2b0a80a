"""podgang: every pod in the right gang, every gang the right size.

The grouping rules live in :mod:`podgang.rules` (pure functions, no I/O); the
PodGroup dialect (API group/version, field names) in :mod:`podgang.dialect`;
configuration as plain data in :mod:`podgang.settings`.
"""

__version__ = "0.1.0"
