"""Tests against the in-process HTTP API emulator (``tests/emulator/``) or podgang's processes on real TLS: no real cluster."""
