"""Loaded first for every test directory of the repo.

setuptools is imported before any test runs. Without this, a session that builds a Genesis scene and
later compiles a network with torch.compile on the CPU fails inside that compile: inductor's CPU build
check imports setuptools, whose distutils check then finds the standard library's distutils where it
expects its own ('_distutils' in distutils.core.__file__). Imported up front, setuptools sets up its
distutils before either runs, and the two tests pass in one session. (Where setuptools is not
installed, inductor's CPU build cannot import it either, so there is nothing to set up.)
"""

import importlib.util
import os

# MuJoCo picks its OpenGL platform once, at its first import, which many tests do long before the
# video test runs; headless EGL is what unilab-play --video uses, so the whole session starts on it.
os.environ.setdefault("MUJOCO_GL", "egl")

if importlib.util.find_spec("setuptools") is not None:
    import setuptools  # noqa: F401
