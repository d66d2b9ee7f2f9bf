"""Source gates for the runtime, checked by AST (import-linter covers imports too; these
also run under plain pytest and catch what import graphs cannot)."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "unilab"
RUNTIME = [p for p in SRC.rglob("*.py") if "assets" not in p.relative_to(SRC).parts]
ENGINE_SDKS = {"mujoco", "mujoco_warp", "warp", "genesis"}


def _imported_roots(path: Path) -> set[str]:
    roots = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            roots |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


def test_runtime_modules_exist():
    assert any(p.name == "env.py" for p in RUNTIME)


def test_no_numpy_and_no_engine_sdk_in_runtime_modules():
    bad = {str(p.relative_to(SRC)): sorted(_imported_roots(p) & (ENGINE_SDKS | {"numpy"})) for p in RUNTIME}
    assert not {k: v for k, v in bad.items() if v}


def test_no_legacy_runtime_token_anywhere():
    token = "tensor" + "_runtime"
    offenders = [str(p) for p in SRC.rglob("*.py") if token in p.read_text()]
    offenders += [str(p) for p in Path(__file__).parent.rglob("*.py") if token in p.read_text()]
    assert not offenders


def test_gate_catches_a_planted_numpy_import(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text("import numpy as np\nfrom mujoco import mj_step\n")
    assert _imported_roots(planted) & (ENGINE_SDKS | {"numpy"}) == {"numpy", "mujoco"}
