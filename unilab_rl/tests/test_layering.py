"""Architecture rules this package keeps (mirrors the import-linter contracts in .importlinter):
only unilab_rl.cli may import unilab; runtime code does not use numpy."""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "unilab_rl"


def imported_roots(path: Path) -> set[str]:
    roots = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


MODULES = sorted(PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("path", [p for p in MODULES if "cli" not in p.relative_to(PACKAGE).parts],
                         ids=lambda p: str(p.relative_to(PACKAGE)))
def test_only_the_cli_imports_unilab_or_unisim(path):
    assert not imported_roots(path) & {"unilab", "unisim"}


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_numpy_in_runtime_code(path):
    assert "numpy" not in imported_roots(path)


def test_the_rule_catches_a_planted_violation(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text("from unilab.env import ManagerBasedRlEnv\nimport numpy as np\n")
    assert {"unilab", "numpy"} <= imported_roots(planted)


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_engine_sdk_anywhere_in_unilab_rl(path):
    # Video drawing is unilab's leaf I/O (unilab.assets.video), reached through the CLI.
    assert not imported_roots(path) & {"mujoco", "mujoco_warp", "warp", "genesis", "imageio"}
