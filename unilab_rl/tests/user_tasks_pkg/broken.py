"""A user module whose import fails inside it (a dependency it lacks)."""

import a_dependency_nobody_installed  # noqa: F401
