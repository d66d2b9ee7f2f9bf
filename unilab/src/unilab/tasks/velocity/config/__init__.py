"""Robot configurations of the velocity task, one folder per robot."""
