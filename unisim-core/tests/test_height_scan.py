"""Height scans beyond the conformance suite: the spec's own checks, the pattern's layout, the
ray scene, genesis refusing before it builds, mjwarp's scan in its graphs without a host sync."""

from __future__ import annotations

import pytest
import torch
import unisim
from unisim import ContractViolation, HeightScanSpec
from unisim.conformance import HEIGHT_SCAN_PROBE_MODEL
from unisim.height_scan import yaw_frame_origins
from unisim.host_sync import HostSyncProbe


def spec(**changes) -> HeightScanSpec:
    base = {"name": "scan", "body": "scanner", "size": (0.4, 0.2), "resolution": 0.2, "offset": (0.1, 0.0, 0.5),
            "max_distance": 2.0, "geom_groups": (2,)}
    return HeightScanSpec(**{**base, **changes})


def test_the_grid_is_centred_on_the_offset_with_x_varying_fastest():
    s = spec()
    assert s.grid == (3, 2) and s.num_rays == 6
    expected = [(-0.1, -0.1), (0.1, -0.1), (0.3, -0.1), (-0.1, 0.1), (0.1, 0.1), (0.3, 0.1)]
    torch.testing.assert_close(s.pattern()[:, :2], torch.tensor(expected, dtype=torch.float64))
    assert torch.all(s.pattern()[:, 2] == 0.5)
    assert spec(size=(0.0, 0.0)).num_rays == 1, "a zero-size pattern is one ray under the offset"
    assert spec(size=(1.6, 1.0), resolution=0.1).grid == (17, 11), "Isaac Lab's G1 scan: 17 x 11 rays"


def test_origins_turn_with_the_heading_only():
    pattern = torch.tensor([[1.0, 0.0, 0.5]], dtype=torch.float64)
    half = torch.tensor(0.25 * torch.pi, dtype=torch.float64)  # yaw 90 degrees
    yawed = torch.tensor([[torch.cos(half), 0.0, 0.0, torch.sin(half)]], dtype=torch.float64)
    rolled = torch.tensor([[torch.cos(half), torch.sin(half), 0.0, 0.0]], dtype=torch.float64)  # roll 90 degrees
    pos = torch.tensor([[1.0, 2.0, 3.0]], dtype=torch.float64)
    torch.testing.assert_close(yaw_frame_origins(pos, yawed, pattern)[0, 0],
                               torch.tensor([1.0, 3.0, 3.5], dtype=torch.float64))
    torch.testing.assert_close(yaw_frame_origins(pos, rolled, pattern)[0, 0],
                               torch.tensor([2.0, 2.0, 3.5], dtype=torch.float64))


@pytest.mark.parametrize(("changes", "argument"), [
    ({"name": ""}, "name"),
    ({"body": ""}, "body"),
    ({"size": (-1.0, 1.0)}, "size"),
    ({"size": (1.0,)}, "size"),
    ({"resolution": 0.0}, "resolution"),
    ({"max_distance": float("inf")}, "max_distance"),
    ({"offset": (0.0, 0.0, float("nan"))}, "offset"),
    ({"geom_groups": (6,)}, "geom_groups"),
    ({"geom_groups": (True,)}, "geom_groups"),
    ({"geom_groups": (2, 2)}, "geom_groups"),
    ({"geom_groups": (), "geoms": ("a", "a")}, "geoms"),
    ({"geom_groups": ()}, "exactly one of geom_groups and geoms"),
    ({"geoms": ("floor",)}, "exactly one of geom_groups and geoms"),
])
def test_a_bad_spec_is_refused_naming_the_argument(changes, argument):
    with pytest.raises(ContractViolation, match=argument):
        spec(**changes)


@pytest.mark.parametrize("requests", [spec(), "scan", [spec(), spec()], [object()]])
def test_create_backend_refuses_bad_request_lists(requests):
    with pytest.raises(ContractViolation, match="height_scans"):
        unisim.create_backend("mujoco", model=str(HEIGHT_SCAN_PROBE_MODEL), num_envs=1, height_scans=requests)


def test_genesis_refuses_a_scan_before_it_builds_anything():
    pytest.importorskip("genesis")
    with pytest.raises(ContractViolation, match="does not declare Feature.HEIGHT_SCAN"):
        unisim.create_backend("genesis", model=str(HEIGHT_SCAN_PROBE_MODEL), num_envs=1, device="cpu",
                              height_scans=[spec()])


def test_the_scan_leaves_physics_and_the_models_own_views_as_they_were():
    plain = unisim.create_backend("mujoco", model=str(HEIGHT_SCAN_PROBE_MODEL), num_envs=2)
    scanned = unisim.create_backend("mujoco", model=str(HEIGHT_SCAN_PROBE_MODEL), num_envs=2, height_scans=[spec()])
    try:
        assert scanned.inventory() == plain.inventory()
        for b in (plain, scanned):
            for _ in range(3):
                b.step(torch.zeros(2, 0), 2)
        assert torch.equal(scanned.views().qpos, plain.views().qpos)
        assert torch.equal(scanned.views().body_pos_w, plain.views().body_pos_w)
    finally:
        plain.close()
        scanned.close()


def test_mjwarp_casts_in_its_graphs_without_a_host_sync():
    pytest.importorskip("mujoco_warp")
    b = unisim.create_backend("mjwarp", model=str(HEIGHT_SCAN_PROBE_MODEL), num_envs=2, device="cpu",
                              validate=False, height_scans=[spec()])
    try:
        ctrl = torch.zeros(2, 0)
        b.step(ctrl, 2)  # captures the step graph
        qpos, qvel = b.views().qpos.clone(), torch.zeros_like(b.views().qvel)
        qpos[:, 2] += 0.4  # the scanner higher: every ray longer by 0.4
        before = b.views().height_scans["scan"].distance.clone()
        with HostSyncProbe() as probe:
            b.set_state_where(torch.tensor([True, False]), qpos, qvel)
            b.step(ctrl, 2)
        assert probe.syncs == [], probe.syncs
        assert b.diagnostics()["step_mode"] == "cpu_graph"
        after = b.views().height_scans["scan"].distance
        assert float((after[0] - before[0]).mean()) > 0.3, "the written row was cast at its new height"
    finally:
        b.close()
