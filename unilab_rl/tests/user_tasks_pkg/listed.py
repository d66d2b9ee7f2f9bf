"""A module a package lists in the ``unilab.tasks`` entry-point group: its task appears by name."""

from __future__ import annotations

from unilab.tasks.velocity.config.g1.flat import g1_walk_flat

from unilab import register_task


def user_listed_task():
    return g1_walk_flat()


register_task("user_listed_task", user_listed_task)
