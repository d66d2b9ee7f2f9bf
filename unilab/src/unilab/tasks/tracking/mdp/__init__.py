"""Terms of the motion-tracking task."""
