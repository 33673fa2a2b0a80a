"""Unit tests: pure functions and in-process objects — no HTTP server, no cluster."""
