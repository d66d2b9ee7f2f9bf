"""contracts/env_runner/v1.json vs unilab_rl.contract: drift without a version bump fails."""

import json
import tomllib
from pathlib import Path

import pytest
from unilab_rl.contract import ENV_RUNNER_CONTRACT_VERSION
from unilab_rl.contract_surface import contract_surface

REPO = Path(__file__).resolve().parents[2]
MANIFEST_PATH = "contracts/env_runner/v1.json"


def manifest():
    return json.loads((REPO / MANIFEST_PATH).read_text())


def manifest_members(document, protocol):
    members = dict(document["surface"]["classes"][protocol])
    if protocol in document.get("call_signatures", {}):
        members["__call__"] = document["call_signatures"][protocol]
    return members


def test_every_protocol_member_is_in_the_manifest_with_its_signature_and_semantics():
    document = manifest()
    for protocol, members in contract_surface().items():
        assert manifest_members(document, protocol) == members, f"{protocol} drifted from {MANIFEST_PATH}"
        for name in members:
            assert document["member_semantics"].get(f"{protocol}.{name}"), f"{protocol}.{name} has no semantics"


def test_versions_agree_between_code_manifest_and_workspace():
    workspace = tomllib.loads((REPO / "workspace.toml").read_text())
    assert manifest()["version"] == ENV_RUNNER_CONTRACT_VERSION
    assert workspace["contracts"]["env_runner"]["version"] == ENV_RUNNER_CONTRACT_VERSION
    assert workspace["members"]["unilab_rl"]["consumes"]["env_runner"] == ENV_RUNNER_CONTRACT_VERSION


def gate_entry():
    return {"manifest": MANIFEST_PATH, "version": ENV_RUNNER_CONTRACT_VERSION}


def test_workspace_gate_finds_no_drift_and_the_released_hash():
    gates = pytest.importorskip("unilab_gates.manifests")
    assert gates.check_contract("env_runner", gate_entry(), REPO) == []


def test_a_changed_member_is_reported_as_drift(monkeypatch):
    gates = pytest.importorskip("unilab_gates.manifests")
    from unilab_rl import contract

    monkeypatch.setitem(vars(contract.RunnerEnv)["__annotations__"], "num_envs", "float")
    errors = gates.check_contract("env_runner", gate_entry(), REPO)
    assert errors and "drift" in errors[0]
    assert manifest_members(manifest(), "RunnerEnv") != contract_surface()["RunnerEnv"]
