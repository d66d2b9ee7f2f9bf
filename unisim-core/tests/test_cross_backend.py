"""Cross-backend agreement: from the same qpos/qvel (set_state, no step) mujoco, mjwarp and
genesis publish the same body poses, body-origin velocities and sensor values.

Only kinematic quantities are compared (float32 rounding, ~1e-6): trajectories after
stepping are never claimed to match. The G1 case needs the scene path in UNISIM_G1_SCENE
(``make g1-scene`` prints it) and is slow on CPU (three builds of a 31-body robot).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
import unisim
from sim_test_models import with_tilted_site
from unisim.conformance.states import quat_close, random_state
from unisim.mjcf import build_inventory, load_model

TOL = 1e-4
BACKENDS = ("mujoco", "mjwarp", "genesis")
FIELDS = ("qpos", "qvel", "body_pos_w", "body_quat_w", "body_lin_vel_w", "body_ang_vel_w", "sensordata")

# Kinds all three adapters publish, on the built-in model (which has gyro, velocimeter,
# framezaxis, jointpos) plus frame sensors on a rotated site.
EXTRA_SENSORS = """
    <framepos objtype="site" objname="tilted"/> <framequat objtype="site" objname="tilted"/>
    <framexaxis objtype="xbody" objname="left_foot"/> <framelinvel objtype="site" objname="tilted"/>
    <frameangvel objtype="site" objname="tilted"/> <jointvel joint="right_hip"/>
    <gyro site="tilted"/> <velocimeter site="tilted"/>
  </sensor>"""


def published(name: str, model: str, n: int, rows: torch.Tensor, qpos: torch.Tensor,
              qvel: torch.Tensor) -> dict[str, torch.Tensor]:
    b = unisim.create_backend(name, model=model, num_envs=n, device="cpu")
    try:
        b.set_state(rows, qpos, qvel)
        v = b.views()
        return {f: getattr(v, f)[rows].clone() for f in FIELDS}
    finally:
        b.close()


def assert_agree(results: dict[str, dict[str, torch.Tensor]]) -> None:
    ref = results["mujoco"]
    for name, got in results.items():
        for field in FIELDS:
            a, b = got[field], ref[field]
            if field == "body_quat_w":
                err = quat_close(a, b).max().item()
            else:
                err = (a - b).abs().max().item() if a.numel() else 0.0
            assert err < TOL, f"{name} {field} differs from mujoco by {err}"


@pytest.fixture(scope="module")
def hopper_xml(builtin_model) -> str:
    return with_tilted_site(Path(builtin_model).read_text().replace("</sensor>", EXTRA_SENSORS, 1))


def test_three_backends_publish_the_same_kinematics_from_the_same_state(hopper_xml):
    pytest.importorskip("mujoco_warp")
    pytest.importorskip("genesis")
    n = 3
    inv = build_inventory(load_model(hopper_xml))
    rows = torch.tensor([0, 2])
    qpos, qvel = random_state(inv, len(rows), 11)
    assert_agree({name: published(name, hopper_xml, n, rows, qpos, qvel) for name in BACKENDS})


@pytest.mark.slow
def test_three_backends_agree_on_the_g1_scene():
    path = os.environ.get("UNISIM_G1_SCENE")
    if not path:
        pytest.skip("set UNISIM_G1_SCENE to the G1 scene MJCF (make g1-scene prints it)")
    pytest.importorskip("mujoco_warp")
    pytest.importorskip("genesis")
    n = 4
    inv = build_inventory(load_model(path))
    rows = torch.tensor([1, 3])
    qpos, qvel = random_state(inv, len(rows), 12)
    assert_agree({name: published(name, path, n, rows, qpos, qvel) for name in BACKENDS})
