"""Height-scan conformance (contract 1.5; see unisim.height_scan for the semantics checked).

Runs on the height-scan probe (unisim/models/height_scan_probe.xml: a floor, a step, a slope, a
heightfield, a non-terrain wall and two free bodies) for every backend and device given. The
reference is MuJoCo C's ``mj_ray`` on the full probe model, the pattern laid out independently
of every adapter (``unisim.adapters.mujoco_reference``). A backend that does not declare
``Feature.HEIGHT_SCAN`` skips the cases that read scans and must refuse a request instead.
"""

from __future__ import annotations

import math

import pytest
import torch

import unisim
from unisim import ContractViolation, Feature, HeightScanSpec
from unisim.adapters.mujoco_reference import mj_ray_height_scan
from unisim.conformance import HEIGHT_SCAN_PROBE_MODEL

TOL = 1e-4  # metres: float32 poses on a device backend
SPEC = HeightScanSpec("terrain", body="scanner", size=(0.6, 0.4), resolution=0.2, offset=(0.2, -0.1, 0.6),
                      max_distance=3.0, geom_groups=(2,))
PARKED = (-4.0, 0.0, 0.2)  # the rover, out of every ray's way


def pose(x: float, y: float, z: float, yaw: float, roll: float = 0.0, pitch: float = 0.0) -> list[float]:
    """Position and wxyz quaternion of yaw (z) * pitch (y) * roll (x)."""
    cr, sr, cp, sp = math.cos(roll / 2), math.sin(roll / 2), math.cos(pitch / 2), math.sin(pitch / 2)
    cy, sy = math.cos(yaw / 2), math.sin(yaw / 2)
    return [x, y, z, cr * cp * cy + sr * sp * sy, sr * cp * cy - cr * sp * sy, cr * sp * cy + sr * cp * sy,
            cr * cp * sy - sr * sp * cy]


POSES = [
    pose(0.0, 0.0, 0.5, 0.0),                          # over the floor
    pose(0.5, 0.1, 0.8, 0.7),                          # straddling the step's edge, turned
    pose(-1.5, 0.2, 1.2, 2.5, roll=0.3, pitch=-0.2),   # over the slope, turned and tilted
    pose(0.3, 3.0, 1.0, -1.2),                         # over the heightfield
    pose(3.0, 0.0, 1.5, 0.4),                          # over the wall (group 0: not terrain)
    pose(0.0, 0.0, 10.0, 0.3),                         # out of reach: no hit
]


def state(backend: unisim.SimBackend, poses: list[list[float]], rover: list[tuple[float, float, float]] | None = None):
    inv = backend.inventory()
    qpos = torch.zeros(len(poses), backend.state_widths().nq)
    a, r = inv.joint("scanner_root").qpos_adr, inv.joint("rover_root").qpos_adr
    for i, p in enumerate(poses):
        qpos[i, a:a + 7] = torch.tensor(p)
        qpos[i, r:r + 7] = torch.tensor([*(rover[i] if rover else PARKED), 1.0, 0.0, 0.0, 0.0])
    return qpos.to(backend.device), torch.zeros(len(poses), backend.state_widths().nv, device=backend.device)


def reference(qpos: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    distance, hit_z = mj_ray_height_scan(HEIGHT_SCAN_PROBE_MODEL, qpos.detach().cpu().double().numpy(), SPEC)
    return torch.from_numpy(distance).float(), torch.from_numpy(hit_z).float()


def assert_matches_reference(backend: unisim.SimBackend, rows: torch.Tensor | None = None) -> None:
    view = backend.views().height_scans["terrain"]
    qpos = backend.views().qpos if rows is None else backend.views().qpos[rows]
    want_d, want_z = reference(qpos)
    got = [t.detach().cpu() if rows is None else t.detach().cpu()[rows.cpu()]
           for t in (view.distance, view.hit_z_w, view.hit)]
    torch.testing.assert_close(got[0], want_d, atol=TOL, rtol=0)
    torch.testing.assert_close(got[1], want_z, atol=TOL, rtol=0)
    assert torch.equal(got[2], want_d < SPEC.max_distance)


@pytest.fixture(scope="module")
def plain(conformance_backend) -> dict[str, object]:
    """What a backend built with no request declares and publishes."""
    name, device = conformance_backend
    b = unisim.create_backend(name, model=str(HEIGHT_SCAN_PROBE_MODEL), num_envs=1, device=device)
    try:
        return {"declares": b.capabilities.has(Feature.HEIGHT_SCAN), "scans": dict(b.views().height_scans)}
    finally:
        b.close()


@pytest.fixture(scope="module")
def declares(plain) -> bool:
    return plain["declares"]


@pytest.fixture(scope="module")
def scanned(conformance_backend, declares):
    """One env per pose of POSES, written with set_state."""
    if not declares:
        pytest.skip("backend does not declare HEIGHT_SCAN (its refusal is checked instead)")
    name, device = conformance_backend
    b = unisim.create_backend(name, model=str(HEIGHT_SCAN_PROBE_MODEL), num_envs=len(POSES), device=device,
                              height_scans=[SPEC])
    b.set_state(torch.arange(len(POSES), device=b.device), *state(b, POSES))
    yield b
    b.close()


def test_a_backend_without_the_feature_refuses_a_request_naming_it(conformance_backend, declares):
    if declares:
        pytest.skip("backend declares HEIGHT_SCAN")
    name, device = conformance_backend
    with pytest.raises(ContractViolation, match="height_scan"):
        unisim.create_backend(name, model=str(HEIGHT_SCAN_PROBE_MODEL), num_envs=1, device=device,
                              height_scans=[SPEC])


def test_no_request_publishes_no_scan_views(plain):
    assert plain["scans"] == {}


def test_scan_views_have_the_declared_shape_dtype_device_and_stay_live(scanned):
    view = scanned.views().height_scans["terrain"]
    n, nray = scanned.num_envs, SPEC.num_rays
    assert view.spec == SPEC and view.body_id == scanned.inventory().body("scanner").index
    for t, dtype in ((view.distance, torch.float32), (view.hit_z_w, torch.float32), (view.hit, torch.bool)):
        assert t.shape == (n, nray) and t.dtype == dtype and t.device == scanned.device
    before = [t.data_ptr() for t in (view.distance, view.hit, view.hit_z_w)]
    scanned.step(torch.zeros(n, scanned.state_widths().nu, device=scanned.device), 1)
    after = scanned.views().height_scans["terrain"]
    assert [t.data_ptr() for t in (after.distance, after.hit, after.hit_z_w)] == before
    scanned.set_state(torch.arange(n, device=scanned.device), *state(scanned, POSES))


def test_written_rows_match_mj_ray_without_a_physics_step(scanned):
    """Heading-aligned pattern, offset above the body, terrain only (the wall and the body's own
    geom unseen), a heightfield, a slope under a tilted body: all against mj_ray."""
    steps = scanned.diagnostics()["physics_steps"]
    scanned.set_state(torch.arange(scanned.num_envs, device=scanned.device), *state(scanned, POSES))
    assert scanned.diagnostics()["physics_steps"] == steps
    assert_matches_reference(scanned)


def test_nothing_within_reach_reads_max_distance_and_no_hit(scanned):
    view = scanned.views().height_scans["terrain"]
    far = len(POSES) - 1
    assert torch.all(view.distance[far].cpu() == SPEC.max_distance)
    assert not view.hit[far].any()
    origin_z = POSES[far][2] + SPEC.offset[2]
    torch.testing.assert_close(view.hit_z_w[far].cpu(), torch.full((SPEC.num_rays,), origin_z - SPEC.max_distance))
    assert view.hit[:far].all(), "every other pose has terrain within reach"


def test_a_moving_body_under_the_rays_is_not_terrain(scanned):
    rover = [PARKED] * len(POSES)
    rover[0] = (POSES[0][0], POSES[0][1], 0.2)  # the rover parked right under the scanner
    qpos, qvel = state(scanned, POSES, rover)
    scanned.set_state(torch.arange(scanned.num_envs, device=scanned.device), qpos, qvel)
    want_d, _ = reference(state(scanned, POSES)[0])
    torch.testing.assert_close(scanned.views().height_scans["terrain"].distance[0].cpu(), want_d[0], atol=TOL, rtol=0)


def test_scans_follow_the_state_physics_reaches(scanned):
    qpos, qvel = state(scanned, POSES)
    qvel[:, 0:3] = torch.tensor([0.6, -0.3, 0.5])  # moving and turning (free-joint qvel: world lin, body ang)
    qvel[:, 3:6] = torch.tensor([0.4, -0.2, 1.5])
    scanned.set_state(torch.arange(scanned.num_envs, device=scanned.device), qpos, qvel)
    ctrl = torch.zeros(scanned.num_envs, scanned.state_widths().nu, device=scanned.device)
    for _ in range(5):
        scanned.step(ctrl, 2)
    moved = scanned.views().qpos.cpu()[:, :3] - qpos.cpu()[:, :3]
    assert bool((moved.norm(dim=1) > 0.02).all())
    assert_matches_reference(scanned)


def test_a_masked_reset_recasts_the_written_rows_and_only_them(scanned):
    n, dev = scanned.num_envs, scanned.device
    scanned.set_state(torch.arange(n, device=dev), *state(scanned, POSES))
    before = {k: getattr(scanned.views().height_scans["terrain"], k).detach().cpu().clone()
              for k in ("distance", "hit", "hit_z_w")}
    qpos, qvel = state(scanned, [pose(p[0] + 0.25, p[1] - 0.1, p[2], 1.1) for p in POSES])
    mask = torch.tensor([True, False, True, True, False, False], device=dev)
    scanned.set_state_where(mask, qpos, qvel)
    rows = mask.nonzero().squeeze(1)
    assert_matches_reference(scanned, rows)
    keep = (~mask).cpu()
    for key, value in before.items():
        assert torch.equal(getattr(scanned.views().height_scans["terrain"], key).detach().cpu()[keep], value[keep])


@pytest.mark.parametrize(("changes", "argument"), [
    ({"body": "nobody"}, "body"),
    ({"body": "world"}, "body"),
    ({"geom_groups": (), "geoms": ("nowhere",)}, "geoms"),
    ({"geom_groups": (), "geoms": ("rover_geom",)}, "geoms"),   # a moving body is not terrain
    ({"geom_groups": (4,)}, "geom_groups"),                      # no static geom there
])
def test_a_request_the_model_cannot_serve_is_refused_naming_the_argument(conformance_backend, declares, changes,
                                                                         argument):
    if not declares:
        pytest.skip("backend does not declare HEIGHT_SCAN")
    name, device = conformance_backend
    spec = HeightScanSpec(**{**SPEC.__dict__, **changes})
    with pytest.raises(ContractViolation, match=rf"height_scans\['terrain'\]\.{argument}"):
        unisim.create_backend(name, model=str(HEIGHT_SCAN_PROBE_MODEL), num_envs=1, device=device,
                              height_scans=[spec])
