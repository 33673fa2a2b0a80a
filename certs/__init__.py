"""podgang certs."""
