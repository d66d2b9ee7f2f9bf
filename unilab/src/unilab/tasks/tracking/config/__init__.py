"""Robot configurations of the tracking task, one folder per robot."""
