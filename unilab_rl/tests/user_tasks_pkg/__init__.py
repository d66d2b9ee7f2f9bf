"""A user's own task package, as docs/tasks.md writes one: its module registers its tasks."""
