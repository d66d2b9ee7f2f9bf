import tomllib
from pathlib import Path

from unilab_rl.contract import ENV_RUNNER_CONTRACT_VERSION
from unilab_rl.contract_surface import contract_surface, surface_digest

REPO = Path(__file__).resolve().parents[2]
MANIFEST = REPO / "contracts" / "env_runner" / "v1.toml"


def load_manifest():
    return tomllib.loads(MANIFEST.read_text())


def test_manifest_lists_exactly_the_protocol_members():
    manifest = load_manifest()["protocols"]
    surface = contract_surface()
    assert sorted(manifest) == sorted(surface)
    for protocol, members in surface.items():
        assert sorted(manifest[protocol]) == sorted(members), f"{protocol} members drifted from the manifest"
        for name, signature in members.items():
            assert manifest[protocol][name]["signature"] == signature, f"{protocol}.{name} signature drifted"
            assert manifest[protocol][name]["semantics"].strip(), f"{protocol}.{name} has no semantics"


def test_surface_digest_matches_the_one_recorded_for_this_version():
    manifest = load_manifest()
    assert manifest["contract"]["version"] == ENV_RUNNER_CONTRACT_VERSION
    recorded = manifest["digests"].get(ENV_RUNNER_CONTRACT_VERSION)
    assert recorded == surface_digest(), (
        "the contract surface changed without a version bump: add a new version to [digests], "
        "bump ENV_RUNNER_CONTRACT_VERSION and workspace.toml")
    assert len(set(manifest["digests"].values())) == len(manifest["digests"]), "two versions share a surface"


def test_workspace_declares_the_same_env_runner_version():
    workspace = tomllib.loads((REPO / "workspace.toml").read_text())
    assert workspace["contracts"]["env_runner"]["version"] == ENV_RUNNER_CONTRACT_VERSION
    assert workspace["members"]["unilab_rl"]["consumes"]["env_runner"] == ENV_RUNNER_CONTRACT_VERSION


def test_drift_is_detected_when_a_member_changes(monkeypatch):
    from unilab_rl import contract

    before = surface_digest()
    monkeypatch.setitem(vars(contract.RunnerEnv)["__annotations__"], "num_envs", "float")
    assert surface_digest() != before
