"""Every gate must be able to fail: plant a violation, run the real tool, see it break."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from unilab_gates import manifests
from unilab_gates.ast_contracts import (
    backend_name_violations,
    private_attribute_violations,
)

REPO = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"
NAMES = {"mujoco", "mjwarp", "genesis", "newton"}


def test_private_attribute_rule_flags_other_objects_only():
    source = textwrap.dedent("""
        class A:
            def f(self, backend):
                self._own = 1
                super()._init()
                x = backend._data
                y = getattr(backend, "_model")
                return backend.views().__class__
    """)
    found = private_attribute_violations(source)
    assert [line for line, _ in found] == [6, 7]


def test_backend_name_rule_flags_decisions_on_names():
    source = textwrap.dedent("""
        def f(backend, name, caps):
            if name == "mjwarp":
                pass
            if backend.name in ("mujoco", "genesis"):
                pass
            table = {"newton": 1}
            match name:
                case "genesis":
                    pass
            if caps.data_plane == "device":
                pass
            return ["mujoco", "mjwarp"]  # a list of choices is not a decision
    """)
    found = backend_name_violations(source, NAMES)
    assert sorted(line for line, _ in found) == [3, 5, 7, 9]


def _lint_planted(tmp_path: Path, module_source: str, contract: str) -> subprocess.CompletedProcess:
    pkg = tmp_path / "planted"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "runtime.py").write_text(textwrap.dedent(module_source))
    shutil.copy(REPO / "workspace.toml", tmp_path / "workspace.toml")
    (tmp_path / ".importlinter").write_text(textwrap.dedent(f"""
        [importlinter]
        root_packages =
            planted
        include_external_packages = True
        contract_types =
            private_attribute: unilab_gates.PrivateAttributeContract
            backend_name_dispatch: unilab_gates.BackendNameDispatchContract
        {contract}
    """))
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    return subprocess.run([str(LINT_IMPORTS)], cwd=tmp_path, env=env, capture_output=True, text=True)


PRIVATE = """
[importlinter:contract:p]
name = planted private
type = private_attribute
containers =
    planted
"""
NAME_DISPATCH = """
[importlinter:contract:n]
name = planted dispatch
type = backend_name_dispatch
containers =
    planted
"""
NUMPY = """
[importlinter:contract:np]
name = planted numpy
type = forbidden
source_modules =
    planted
forbidden_modules =
    numpy
"""


@pytest.mark.parametrize("contract,bad,good", [
    (PRIVATE, "def f(b):\n    return b._data\n", "def f(b):\n    return b.views()\n"),
    (NAME_DISPATCH, "def f(name):\n    return name == 'mjwarp'\n", "def f(caps):\n    return caps.data_plane\n"),
    (NUMPY, "import numpy\n", "import math\n"),
])
def test_lint_imports_fails_on_a_planted_violation_and_passes_without(tmp_path, contract, bad, good):
    (tmp_path / "bad").mkdir()
    (tmp_path / "good").mkdir()
    broken = _lint_planted(tmp_path / "bad", bad, contract)
    assert broken.returncode != 0, broken.stdout + broken.stderr
    assert "BROKEN" in broken.stdout
    clean = _lint_planted(tmp_path / "good", good, contract)
    assert clean.returncode == 0, clean.stdout + clean.stderr


def test_manifest_check_fails_on_drift_and_on_unbumped_surface_change(tmp_path):
    real = json.loads((REPO / "contracts/simbackend/v1.json").read_text())
    entry = {"manifest": "v1.json", "version": real["version"]}
    (tmp_path / "v1.json").write_text(json.dumps(real))
    assert manifests.check_contract("simbackend", entry, tmp_path) == []

    drifted = json.loads(json.dumps(real))
    drifted["surface"]["classes"]["SimBackend"].pop("set_state")
    (tmp_path / "v1.json").write_text(json.dumps(drifted))
    errors = manifests.check_contract("simbackend", entry, tmp_path)
    assert any("drift" in e and "set_state" in e for e in errors)
    assert any("without a version bump" in e for e in errors)

    bumped_elsewhere = json.loads(json.dumps(real))
    bumped_elsewhere["version"] = "9.9.9"
    (tmp_path / "v1.json").write_text(json.dumps(bumped_elsewhere))
    errors = manifests.check_contract("simbackend", entry, tmp_path)
    assert any("versions disagree" in e for e in errors)


LEGACY_TOKEN = "tensor" + "_runtime"  # spelled in two parts so this file does not trip itself


def legacy_token_offenders(root: Path) -> list[str]:
    return [str(p) for p in root.rglob("*.py") if ".venv" not in p.parts and LEGACY_TOKEN in p.read_text()]


def test_no_legacy_runtime_switch_anywhere_in_the_workspace():
    offenders = [p for pkg in ("unisim-core", "unilab", "unilab_rl", "ci") for p in legacy_token_offenders(REPO / pkg)]
    assert offenders == []


def test_legacy_token_scan_finds_a_planted_switch(tmp_path):
    (tmp_path / "planted.py").write_text(f"{LEGACY_TOKEN} = 'numpy'\n")
    assert legacy_token_offenders(tmp_path) == [str(tmp_path / "planted.py")]
