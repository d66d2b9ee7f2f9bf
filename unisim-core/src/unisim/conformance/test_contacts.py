"""Contact sensing conformance (contract 1.3; see unisim.contacts for the semantics checked).

Most cases run on the contact probe scene (unisim/models/contact_probe.xml) for every
backend and device given; the standing-G1 case runs on a model given with --unisim-model
that holds the G1's feet.
"""

from __future__ import annotations

import pytest
import torch

import unisim
from unisim import ContactAfterReset, ContactFilter, ContactSensorSpec, ContractViolation, Feature
from unisim.conformance import CONTACT_PROBE_MODEL
from unisim.conformance.states import physics_steps

G = 9.81
WEIGHT_TOL = 0.02  # resting bodies: |force| within 2% of m*g after the probe settles
SETTLE_STEPS, SUBSTEPS = 40, 2  # 0.4 s: the probe's lid has landed; a lifted block falls 0.8 m of 10
LIFT = 10.0  # metres added to the height of both trees in the free-fall row
PROBE = ("block", "lid", "base")  # row order of the "any" and "floor" sensors
SELF = ("lid", "shelf", "base")


def probe_specs(caps: unisim.Capabilities) -> list[ContactSensorSpec]:
    specs = [ContactSensorSpec("any", PROBE), ContactSensorSpec("floor", PROBE, with_bodies=("world",))]
    if ContactFilter.SELF in caps.contact_filters:
        specs.append(ContactSensorSpec("self", SELF, with_self=True))
    if ContactFilter.GEOMS in caps.contact_filters:
        specs.append(ContactSensorSpec("floor_geom", ("block",), with_geoms=("floor",)))
    return specs


def declared(name: str, device: str) -> unisim.Capabilities:
    plain = unisim.create_backend(name, model=str(CONTACT_PROBE_MODEL), num_envs=1, device=device)
    try:
        return plain.capabilities
    finally:
        plain.close()


@pytest.fixture(scope="module")
def caps(conformance_backend) -> unisim.Capabilities:
    caps = declared(*conformance_backend)
    if not caps.has(Feature.CONTACT_SENSORS):
        pytest.skip("backend does not declare CONTACT_SENSORS")
    return caps


@pytest.fixture(scope="module")
def probe(conformance_backend, caps):
    """3 envs of the probe, settled: rows 0 and 2 rest on the floor, row 1 is lifted (free fall)."""
    name, device = conformance_backend
    b = unisim.create_backend(name, model=str(CONTACT_PROBE_MODEL), num_envs=3, device=device,
                              contact_sensors=probe_specs(caps))
    qpos = b.views().qpos.clone()
    inv = b.inventory()
    for root in ("block_root", "base_root"):
        qpos[1, inv.joint(root).qpos_adr + 2] += LIFT
    b.set_state(torch.arange(3, device=b.device), qpos, torch.zeros_like(b.views().qvel))
    ctrl = torch.zeros(3, b.state_widths().nu, device=b.device)
    for _ in range(SETTLE_STEPS):
        b.step(ctrl, SUBSTEPS)
    yield b
    b.close()


def contact(b: unisim.SimBackend, name: str, body: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(force_w (N, 3), in_contact (N,)) of ``body`` in sensor ``name``, on the cpu."""
    view = b.views().contacts[name]
    j = view.spec.bodies.index(body)
    return view.force_w[:, j].detach().cpu(), view.in_contact[:, j].detach().cpu()


def contact_snapshot(b: unisim.SimBackend) -> dict[str, torch.Tensor]:
    out = {}
    for name, view in b.views().contacts.items():
        out[f"{name}.force_w"] = view.force_w.detach().cpu().clone()
        out[f"{name}.in_contact"] = view.in_contact.detach().cpu().clone()
    return out


# ---- declaration and layout ---------------------------------------------------------------
def test_contact_declaration_is_consistent(caps):
    assert caps.contact_filters and ContactFilter.ANY in caps.contact_filters
    assert isinstance(caps.contact_after_reset, ContactAfterReset)


def test_no_request_publishes_no_contact_views(conformance_backend):
    name, device = conformance_backend
    b = unisim.create_backend(name, model=str(CONTACT_PROBE_MODEL), num_envs=1, device=device)
    try:
        assert dict(b.views().contacts) == {}
    finally:
        b.close()


def test_contact_views_have_the_declared_shape_dtype_and_device(probe):
    inv = probe.inventory()
    for spec in probe_specs(probe.capabilities):
        view = probe.views().contacts[spec.name]
        assert view.spec == spec
        assert view.body_ids == tuple(inv.body(b).index for b in spec.bodies)
        assert view.force_w.shape == (probe.num_envs, len(spec.bodies), 3) and view.force_w.dtype == torch.float32
        assert view.in_contact.shape == (probe.num_envs, len(spec.bodies)) and view.in_contact.dtype == torch.bool
        assert view.force_w.device == probe.device and view.in_contact.device == probe.device


def test_contact_views_are_live(probe):
    before = probe.views().contacts["any"]
    probe.step(torch.zeros(probe.num_envs, probe.state_widths().nu, device=probe.device), 1)
    after = probe.views().contacts["any"]
    assert after.force_w.data_ptr() == before.force_w.data_ptr()
    assert after.in_contact.data_ptr() == before.in_contact.data_ptr()


# ---- what the forces say --------------------------------------------------------------------
@pytest.mark.parametrize("sensor", ["any", "floor", "floor_geom"])
def test_a_resting_body_reports_its_weight_and_contact(probe, sensor):
    if sensor not in probe.views().contacts:
        pytest.skip(f"{sensor!r} needs a filter the backend does not declare")
    force, touching = contact(probe, sensor, "block")
    for row in (0, 2):
        assert abs(force[row, 2].item() - 2.0 * G) < WEIGHT_TOL * 2.0 * G, f"row {row}: {force[row].tolist()}"
        assert force[row, :2].abs().max() < WEIGHT_TOL * 2.0 * G, "a body at rest on a level floor feels no shear"
        assert touching[row]


def test_the_floor_carries_a_whole_tree_through_the_body_that_touches_it(probe):
    force, touching = contact(probe, "floor", "base")  # base 3 kg + shelf and lid 0.5 kg each
    assert abs(force[0, 2].item() - 4.0 * G) < WEIGHT_TOL * 4.0 * G, force[0].tolist()
    assert touching[0]


def test_a_body_in_free_fall_reports_no_force_and_no_contact(probe):
    for sensor in ("any", "floor"):
        for body in ("block", "base"):
            force, touching = contact(probe, sensor, body)
            assert torch.equal(force[1], torch.zeros(3)), f"{sensor}/{body}: {force[1].tolist()}"
            assert not touching[1]


def test_self_contact_is_reported_by_the_self_filter_and_not_by_the_floor_filter(probe, caps, conformance_backend):
    if ContactFilter.SELF not in caps.contact_filters:
        name, device = conformance_backend
        with pytest.raises(ContractViolation, match="contact_filters"):
            unisim.create_backend(name, model=str(CONTACT_PROBE_MODEL), num_envs=1, device=device,
                                  contact_sensors=[ContactSensorSpec("self", SELF, with_self=True)])
        return
    lid, lid_touching = contact(probe, "self", "lid")
    shelf, shelf_touching = contact(probe, "self", "shelf")
    base, base_touching = contact(probe, "self", "base")
    assert lid_touching[0] and shelf_touching[0]
    assert lid[0, 2] > 1.0 and shelf[0, 2] < -1.0, "the shelf holds the lid up; the lid presses the shelf down"
    assert (lid[0] + shelf[0]).abs().max() < 0.02 * lid[0].norm(), "one contact: equal and opposite forces"
    assert not base_touching[0], "parent-child contacts are filtered, so the base has no self-contact"
    floor_lid, floor_lid_touching = contact(probe, "floor", "lid")
    assert torch.equal(floor_lid[0], torch.zeros(3)) and not floor_lid_touching[0]
    any_lid, _ = contact(probe, "any", "lid")
    assert (any_lid[0] - lid[0]).abs().max() < 1e-3 * lid[0].norm() + 1e-4, "the lid's only contact is the shelf"


# ---- after a selected reset -----------------------------------------------------------------
def _resting_state(b):
    return b.views().qpos[:1].clone(), torch.zeros_like(b.views().qvel[:1])


def _assert_cleared_rows(b, before, rows, others):
    after = contact_snapshot(b)
    for key in after:
        if key.endswith("force_w"):
            assert torch.equal(after[key][rows], torch.zeros_like(after[key][rows])), key
        else:
            assert not after[key][rows].any(), key
        assert torch.equal(after[key][others], before[key][others]), f"{key} of untouched rows changed"


def test_set_state_clears_contacts_of_written_rows_until_the_next_step(probe):
    assert probe.capabilities.contact_after_reset is ContactAfterReset.CLEARED
    ctrl = torch.zeros(probe.num_envs, probe.state_widths().nu, device=probe.device)
    probe.step(ctrl, SUBSTEPS)
    before = contact_snapshot(probe)
    assert before["any.in_contact"][2].any(), "row 2 rests on the floor before the reset"
    steps = physics_steps(probe)
    qpos, qvel = _resting_state(probe)
    probe.set_state(torch.tensor([2], device=probe.device), qpos, qvel)
    assert physics_steps(probe) == steps, "set_state must not step physics"
    _assert_cleared_rows(probe, before, [2], [0, 1])
    probe.step(ctrl, SUBSTEPS)
    _, touching = contact(probe, "floor", "block")
    assert touching[2], "the next step reports the new state's contacts"
    _settle_again(probe, ctrl)


def test_set_state_where_clears_contacts_of_masked_rows(probe):
    ctrl = torch.zeros(probe.num_envs, probe.state_widths().nu, device=probe.device)
    probe.step(ctrl, SUBSTEPS)
    before = contact_snapshot(probe)
    steps = physics_steps(probe)
    mask = torch.tensor([False, False, True], device=probe.device)
    qpos = probe.views().qpos.clone()
    qpos[2] = probe.views().qpos[0]
    probe.set_state_where(mask, qpos, torch.zeros_like(probe.views().qvel))
    assert physics_steps(probe) == steps, "set_state_where must not step physics"
    _assert_cleared_rows(probe, before, [2], [0, 1])
    _settle_again(probe, ctrl)


def test_a_body_lifted_off_the_floor_reports_no_floor_force_on_the_next_step(probe):
    """Contacts a row had before are not reported once they are gone (a backend keeping a
    fixed-capacity contact list must not read the slots its last count left behind)."""
    ctrl = torch.zeros(probe.num_envs, probe.state_widths().nu, device=probe.device)
    probe.step(ctrl, SUBSTEPS)
    assert contact(probe, "floor", "block")[1][2], "row 2 rests on the floor before the lift"
    qpos = probe.views().qpos.clone()
    inv = probe.inventory()
    for root in ("block_root", "base_root"):
        qpos[2, inv.joint(root).qpos_adr + 2] += LIFT
    probe.set_state(torch.tensor([2], device=probe.device), qpos[2:], torch.zeros_like(probe.views().qvel[2:]))
    probe.step(ctrl, SUBSTEPS)
    for sensor, body in (("floor", "block"), ("floor", "base"), ("any", "block")):
        force, touching = contact(probe, sensor, body)
        assert torch.equal(force[2], torch.zeros(3)), f"{sensor}/{body}: {force[2].tolist()}"
        assert not touching[2]
    probe.set_state(torch.tensor([2], device=probe.device), *_resting_state(probe))
    _settle_again(probe, ctrl)


def _settle_again(probe, ctrl) -> None:
    """Step the shared probe until row 2 rests again, so no case depends on running before a reset
    case (pytest may reorder cases of a module-scoped fixture, e.g. when several models are given)."""
    for _ in range(SETTLE_STEPS // 4):
        probe.step(ctrl, SUBSTEPS)
    _, touching = contact(probe, "floor", "block")
    assert touching[2], "the steps after the reset report the new state's contacts"


# ---- bad requests ---------------------------------------------------------------------------
def _bad_requests():
    return {
        "unknown body": ("bodies", [ContactSensorSpec("x", ("block", "no_such_body"))]),
        "unknown filter body": ("with_bodies", [ContactSensorSpec("x", ("block",), with_bodies=("no_such_body",))]),
        "unknown filter geom": ("with_geoms", [ContactSensorSpec("x", ("block",), with_geoms=("no_such_geom",))]),
        "world sensed": ("bodies", [ContactSensorSpec("x", ("world",))]),
        "body is its own filter": ("with_bodies", [ContactSensorSpec("x", ("block", "base"), with_bodies=("base",))]),
        "geom of a sensed body": ("with_geoms", [ContactSensorSpec("x", ("block",), with_geoms=("block_geom",))]),
        "repeated sensor names": ("contact_sensors", [ContactSensorSpec("x", ("block",)),
                                                      ContactSensorSpec("x", ("base",))]),
        "not a list": ("contact_sensors", ContactSensorSpec("x", ("block",))),
    }


@pytest.mark.parametrize("kind", list(_bad_requests()))
def test_bad_contact_requests_are_refused_naming_the_argument(probe, conformance_backend, caps, kind):
    arg, request = _bad_requests()[kind]
    if isinstance(request, list) and any(s.filter not in caps.contact_filters for s in request):
        arg = "contact_filters"  # refused first for a filter the backend does not declare
    name, device = conformance_backend
    before = contact_snapshot(probe)
    with pytest.raises(ContractViolation, match=arg):
        unisim.create_backend(name, model=str(CONTACT_PROBE_MODEL), num_envs=1, device=device,
                              contact_sensors=request)
    after = contact_snapshot(probe)
    assert all(torch.equal(before[k], after[k]) for k in before), "a refused request changed a running backend"


@pytest.mark.parametrize("kwargs, arg", [
    (dict(bodies=()), "bodies"),
    (dict(bodies="block"), "bodies"),
    (dict(bodies=("block", "block")), "bodies"),
    (dict(bodies=("block",), with_self=True, with_bodies=("world",)), "with_self"),
    (dict(bodies=("block",), with_geoms=("floor",), with_bodies=("world",)), "with_geoms"),
    (dict(bodies=("block",), force_threshold=-1.0), "force_threshold"),
    (dict(bodies=("block",), force_threshold=float("nan")), "force_threshold"),
])
def test_malformed_contact_specs_are_refused_naming_the_argument(kwargs, arg):
    with pytest.raises(ContractViolation, match=arg):
        ContactSensorSpec("x", **kwargs)


def test_an_undeclared_filter_is_refused_naming_the_capability(conformance_backend, caps):
    missing = sorted(set(ContactFilter) - caps.contact_filters, key=lambda f: f.value)
    if not missing:
        pytest.skip("backend declares every contact filter")
    request = {ContactFilter.BODIES: dict(with_bodies=("world",)), ContactFilter.GEOMS: dict(with_geoms=("floor",)),
               ContactFilter.SELF: dict(with_self=True)}[missing[0]]
    name, device = conformance_backend
    with pytest.raises(ContractViolation, match=f"filter '{missing[0].value}'.*contact_filters"):
        unisim.create_backend(name, model=str(CONTACT_PROBE_MODEL), num_envs=1, device=device,
                              contact_sensors=[ContactSensorSpec("x", ("block",), **request)])


# ---- the standing G1 ------------------------------------------------------------------------
G1_FEET = ("left_ankle_roll_link", "right_ankle_roll_link")
G1_STAND_STEPS = 10  # env steps of 4 substeps from the "home" keyframe: 0.2 s, still upright


def test_the_standing_g1_carries_its_weight_on_its_two_feet(conformance_case):
    name, device, model = conformance_case
    reference = unisim.create_backend("mujoco", model=model, num_envs=1, device="cpu")
    inv = reference.inventory()
    reference.close()
    names = [b.name for b in inv.bodies]
    if not set(G1_FEET) <= set(names) or "home" not in [k.name for k in inv.keyframes]:
        pytest.skip("model is not the G1 scene (needs its feet and its 'home' keyframe)")
    if not declared(name, device).has(Feature.CONTACT_SENSORS):
        pytest.skip("backend does not declare CONTACT_SENSORS")
    b = unisim.create_backend(name, model=model, num_envs=2, device=device, contact_sensors=[
        ContactSensorSpec("floor", tuple(names[1:]), with_bodies=("world",))])
    try:
        key = inv.keyframe("home")
        qpos = torch.tensor(key.qpos, dtype=torch.float32, device=b.device).repeat(2, 1)
        b.set_state(torch.arange(2, device=b.device), qpos, torch.zeros(2, inv.widths.nv, device=b.device))
        ctrl = torch.tensor(key.ctrl, dtype=torch.float32, device=b.device).repeat(2, 1)
        for _ in range(G1_STAND_STEPS):
            b.step(ctrl, 4)
        view = b.views().contacts["floor"]
        touching = {names[i] for i in view.body_ids if view.in_contact[0, view.spec.bodies.index(names[i])]}
        assert touching == set(G1_FEET), f"bodies touching the floor: {sorted(touching)}"
        weight = sum(body.mass for body in inv.bodies) * G
        feet = [view.spec.bodies.index(f) for f in G1_FEET]
        carried = view.force_w[:, feet, 2].sum(dim=1).cpu()
        assert ((carried - weight).abs() < 0.03 * weight).all(), f"feet carry {carried.tolist()} N of {weight:.1f} N"
        assert (view.force_w[:, feet, 2].cpu() > 0.25 * weight).all(), "each foot carries part of the weight"
    finally:
        b.close()
