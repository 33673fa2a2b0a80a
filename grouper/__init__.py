"""podgang grouper."""
