"""Terms of the velocity-tracking task."""
