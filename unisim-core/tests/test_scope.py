import tomllib

import pytest
import unisim
from unisim.scope import workspace_file


def test_scope_is_read_from_workspace_toml():
    data = tomllib.loads(workspace_file().read_text())["backends"]
    scope = unisim.backend_scope()
    assert list(scope.active) == data["active"] and list(scope.shelved) == data["shelved"]
    assert set(scope.active) == {"mujoco", "mjwarp", "genesis"}


@pytest.mark.parametrize("name", ["motrix", "newton", "drake", "isaacgym", "isaacsim", "superdex"])
def test_shelved_backends_fail_closed_naming_active_ones(name, builtin_model):
    with pytest.raises(unisim.ContractViolation) as info:
        unisim.create_backend(name, model=builtin_model, num_envs=1)
    assert "gated out" in str(info.value) and "mjwarp" in str(info.value)


def test_unknown_backend_lists_valid_names(builtin_model):
    with pytest.raises(unisim.ContractViolation, match="valid backends.*mujoco"):
        unisim.create_backend("bullet", model=builtin_model, num_envs=1)


@pytest.mark.parametrize("bad", [0, -1, 2.0, "4", True])
def test_num_envs_must_be_a_positive_int(bad, builtin_model):
    with pytest.raises(unisim.ContractViolation, match="num_envs"):
        unisim.create_backend("mujoco", model=builtin_model, num_envs=bad)
