"""The README's Python examples run as written (they are the first code a user copies)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"
SNIPPETS = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)


def test_the_readme_has_python_examples():
    assert len(SNIPPETS) >= 2


@pytest.mark.parametrize("index", range(len(SNIPPETS)))
def test_readme_python_example_runs(index):
    namespace: dict = {}
    exec(compile(SNIPPETS[index], f"README.md python example {index}", "exec"), namespace)  # noqa: S102
    for value in namespace.values():  # close what the example built
        close = getattr(value, "close", None)
        if callable(close) and hasattr(value, "step"):
            close()
