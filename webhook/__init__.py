"""podgang webhook."""
