"""mujoco host-bridge adapter specifics (the shared semantics live in the conformance suite)."""

import mujoco
import numpy as np
import pytest
import torch
import unisim
from sim_test_models import ARMS_XML
from unisim.conformance.states import random_state


@pytest.fixture(scope="module")
def backend(builtin_model):
    b = unisim.create_backend("mujoco", model=builtin_model, num_envs=3, nthread=2)
    yield b
    b.close()


def test_declares_host_bridge_immediate_publication(backend):
    caps = backend.capabilities
    assert caps.data_plane is unisim.DataPlane.HOST_BRIDGE
    assert caps.selected_reset_publication is unisim.ResetPublication.IMMEDIATE
    assert caps.device == torch.device("cpu")


def test_views_match_mj_forward_after_stepping(backend, builtin_model):
    qpos, qvel = random_state(backend.inventory(), 3, 11)
    backend.set_state(torch.arange(3), qpos, qvel)
    backend.step(torch.full((3, 3), 0.2), substeps=3)
    m = mujoco.MjModel.from_xml_path(builtin_model)
    d = mujoco.MjData(m)
    v = backend.views()
    for row in range(3):
        d.qpos[:] = v.qpos[row].double().numpy()
        d.qvel[:] = v.qvel[row].double().numpy()
        mujoco.mj_forward(m, d)
        assert np.abs(d.xpos - v.body_pos_w[row].numpy()).max() < 1e-5
        assert np.abs(d.sensordata - v.sensordata[row].numpy()).max() < 1e-4
        vel = np.zeros(6)
        for b in range(m.nbody):
            # body-origin velocity (XBODY), the contract's convention -- not the COM velocity
            mujoco.mj_objectVelocity(m, d, mujoco.mjtObj.mjOBJ_XBODY, b, vel, 0)
            assert np.abs(vel[3:] - v.body_lin_vel_w[row, b].numpy()).max() < 1e-4
            assert np.abs(vel[:3] - v.body_ang_vel_w[row, b].numpy()).max() < 1e-4


def test_stepping_matches_plain_mj_step(backend, builtin_model):
    qpos, qvel = random_state(backend.inventory(), 3, 12)
    backend.set_state(torch.arange(3), qpos, qvel)
    ctrl = torch.tensor([[0.1, -0.2, 0.3]]).repeat(3, 1)
    backend.step(ctrl, substeps=4)
    m = mujoco.MjModel.from_xml_path(builtin_model)
    d = mujoco.MjData(m)
    d.qpos[:], d.qvel[:] = qpos[0].double().numpy(), qvel[0].double().numpy()
    d.ctrl[:] = ctrl[0].double().numpy()
    mujoco.mj_step(m, d, nstep=4)
    assert np.abs(d.qpos - backend.views().qpos[0].numpy()).max() < 1e-5


def test_friction_write_changes_only_that_env(backend):
    before = backend.model_field("geom_friction")
    backend.set_model_field("geom_friction", torch.tensor([2]), before[2:3] * 0.5)
    after = backend.model_field("geom_friction")
    assert torch.allclose(after[2], before[2] * 0.5) and torch.equal(after[:2], before[:2])
    assert backend.diagnostics()["per_env_models"] is True
    backend.set_model_field("geom_friction", torch.tensor([2]), before[2:3])


def test_bad_nthread_and_unavailable_cuda_are_rejected(builtin_model):
    with pytest.raises(unisim.ContractViolation, match="nthread"):
        unisim.create_backend("mujoco", model=builtin_model, num_envs=1, nthread=0)
    with pytest.raises(unisim.ContractViolation, match=r"nthread: expected an int >= 1, got True"):  # not 1 thread
        unisim.create_backend("mujoco", model=builtin_model, num_envs=1, nthread=True)
    if not torch.cuda.is_available():
        with pytest.raises(unisim.ContractViolation, match="CUDA is not available"):
            unisim.create_backend("mujoco", model=builtin_model, num_envs=1, device="cuda")


def test_an_unknown_option_or_a_non_bool_validate_is_a_contract_violation(builtin_model):
    with pytest.raises(unisim.ContractViolation, match=r"options: unknown mujoco option\(s\) \['nthreadz'\]; "
                                                      r"valid: \['nthread', 'validate'\]"):
        unisim.create_backend("mujoco", model=builtin_model, num_envs=1, nthreadz=1)
    with pytest.raises(unisim.ContractViolation, match="validate: expected a bool, got 'no'"):
        unisim.create_backend("mujoco", model=builtin_model, num_envs=1, validate="no")


def test_zero_or_negative_mass_and_negative_friction_are_refused_by_declared_minimums(backend):
    minimums = backend.capabilities.model_field_minimums
    mass = backend.model_field("body_mass")
    massive = mass[0] > 0
    # Per body: a massless body (the world) may hold 0, a massive one stays above a floor.
    assert minimums["body_mass"] == tuple(1e-6 if m else 0.0 for m in massive.tolist())
    assert minimums["geom_friction"] == (0.0, 0.0, 0.0)
    body = int(massive.nonzero()[0, 0])
    for value in (-1.0, 0.0):
        bad = mass[:1].clone()
        bad[0, body] = value
        with pytest.raises(unisim.ContractViolation, match="body_mass"):
            backend.set_model_field("body_mass", torch.tensor([0]), bad)
        assert torch.equal(backend.model_field("body_mass"), mass)
    light = mass[:1].clone()
    light[0, body] *= 0.5
    backend.set_model_field("body_mass", torch.tensor([0]), light)  # halving is physics
    assert backend.model_field("body_mass")[0, body] == light[0, body]


def test_accelerometer_model_fails_closed():
    xml = """<mujoco><worldbody><body><freejoint/><geom size='.1'/><site name='s'/></body></worldbody>
             <sensor><accelerometer site='s'/></sensor></mujoco>"""
    with pytest.raises(unisim.ContractViolation, match="accelerometer"):
        unisim.create_backend("mujoco", model=xml, num_envs=1)


def test_a_world_mujoco_resets_as_unstable_is_counted(builtin_model, capfd, tmp_path, monkeypatch):
    # A velocity past MuJoCo's 1e10 bound: MuJoCo warns, resets that world to the model's
    # initial state inside the rollout and steps on. Only the other worlds' clocks keep time.
    monkeypatch.chdir(tmp_path)  # MuJoCo also appends its warning to MUJOCO_LOG.TXT in the cwd
    b = unisim.create_backend("mujoco", model=builtin_model, num_envs=3, nthread=2)
    try:
        qpos, qvel = random_state(b.inventory(), 3, 13)
        b.set_state(torch.arange(3), qpos, qvel)
        b.step(torch.zeros(3, 3), substeps=2)
        assert b.diagnostics()["unstable_resets"] == 0
        qvel[1] = 1e11
        b.set_state(torch.tensor([1]), qpos[1:2], qvel[1:2])
        b.step(torch.zeros(3, 3), substeps=2)
        assert b.diagnostics()["unstable_resets"] == 1
        printed = capfd.readouterr()
        assert "unstable" in (printed.err + printed.out).lower()  # MuJoCo's own warning
        b.step(torch.zeros(3, 3), substeps=2)  # the restarted world steps on normally
        assert b.diagnostics()["unstable_resets"] == 1
        # The same world again: two restarts, still one altered world (the contract's count).
        b.set_state(torch.tensor([1]), qpos[1:2], qvel[1:2])
        b.step(torch.zeros(3, 3), substeps=2)
        assert (b.diagnostics()["unstable_resets"], b.diagnostics()["altered_worlds"]) == (2, 1)
    finally:
        b.close()


def test_a_world_written_past_mujocos_stable_range_counts_as_restarted_by_its_next_step(builtin_model):
    # MuJoCo restarts it on the first substep, from time 0, so its clock reads as if nothing
    # happened: the written value is what tells.
    b = unisim.create_backend("mujoco", model=builtin_model, num_envs=2)
    nq, nv, nu = b.state_widths()
    qpos = b.views().qpos[1:].clone()
    b.set_state(torch.tensor([1]), qpos, torch.full((1, nv), 1e11))
    b.step(torch.zeros(2, nu))
    diagnostics = b.diagnostics()
    assert diagnostics["altered_worlds"] == 1 and diagnostics["unstable_resets"] == 1
    b.step(torch.zeros(2, nu))  # counted once: the restarted world steps on from a stable state
    assert b.diagnostics()["unstable_resets"] == 1
    b.close()




def test_a_world_written_with_nan_unvalidated_counts_as_restarted_by_its_next_step(builtin_model):
    # validate=False lets a NaN through; MuJoCo restarts that world on its first substep (its
    # clock again reads as if nothing happened), so the written value must tell, as it does for
    # a value past mjMAXVAL (NaN compares False with the bound).
    b = unisim.create_backend("mujoco", model=builtin_model, num_envs=2, nthread=1, validate=False)
    try:
        nq, nv, nu = b.state_widths()
        qvel = torch.zeros(1, nv)
        qvel[0, 0] = float("nan")
        b.set_state(torch.tensor([1]), b.views().qpos[1:].clone(), qvel)
        b.step(torch.zeros(2, nu))
        diagnostics = b.diagnostics()
        assert diagnostics["altered_worlds"] == 1 and diagnostics["unstable_resets"] == 1
        assert torch.isfinite(b.views().qvel).all()  # MuJoCo did restart it
    finally:
        b.close()


def test_a_centre_of_mass_write_gives_the_physics_of_a_model_compiled_with_it(tmp_path):
    """The compiler's shortcuts for a centre of mass at a body's origin (shared frames, a
    constant mass matrix) must not survive a ``body_ipos`` write."""
    path = tmp_path / "arms.xml"
    path.write_text(ARMS_XML)
    # The same arms compiled with the moved centres of mass: "centred" 20 cm along x, off its
    # hinge axis; "offset" 20 cm further (its site stays where its body put it).
    compiled = mujoco.MjModel.from_xml_string(ARMS_XML.replace(
        '<inertial pos="0 0 0"', '<inertial pos="0.2 0 0"').replace('<inertial pos="0.1 0 0"', '<inertial pos="0.3 0 0"'))
    reference = mujoco.MjData(compiled)
    backend = unisim.create_backend("mujoco", model=str(path), num_envs=2, nthread=1)
    try:
        moved = backend.model_field("body_ipos")[:1].clone()
        moved[0, 1:] = torch.from_numpy(compiled.body_ipos[1:]).float()
        backend.set_model_field("body_ipos", torch.tensor([0]), moved)
        backend.set_state(torch.arange(2), torch.zeros(2, 2), torch.zeros(2, 2))
        mujoco.mj_forward(compiled, reference)
        sensed = backend.views().sensordata
        assert np.abs(sensed[0].numpy() - reference.sensordata).max() < 1e-6, (sensed, reference.sensordata)
        assert torch.allclose(sensed[1], torch.tensor([0.0, 0.0, 1.0, 1.1, 0.0, 1.0])), sensed  # not written
        for _ in range(10):
            backend.step(torch.zeros(2, 2), 2)
        mujoco.mj_step(compiled, reference, nstep=20)
        mujoco.mj_forward(compiled, reference)  # mj_step's sensors describe the state before its last step
        views = backend.views()
        assert np.abs(views.qpos[0].numpy() - reference.qpos).max() < 1e-5, (views.qpos, reference.qpos)
        assert np.abs(views.sensordata[0].numpy() - reference.sensordata).max() < 1e-5
        assert views.qpos[0, 0] > 0.01 and views.qpos[1, 0] == 0, views.qpos  # gravity acts on the moved one only
    finally:
        backend.close()


def test_a_mass_write_on_a_body_the_compiler_called_simple_takes_effect(tmp_path):
    """A slider's share of the mass matrix is a compiled constant in MuJoCo (a "simple" body):
    the written mass must replace it, as in a model compiled with that mass."""
    path = tmp_path / "slider.xml"
    path.write_text("""<mujoco><option gravity="0 0 0"/><worldbody><body name="cart">
        <joint name="x" type="slide" axis="1 0 0"/><inertial pos="0 0 0" mass="1" diaginertia="0.01 0.01 0.01"/>
        </body></worldbody><actuator><motor joint="x"/></actuator></mujoco>""")
    backend = unisim.create_backend("mujoco", model=str(path), num_envs=2, nthread=1)
    try:
        heavy = backend.model_field("body_mass")[:1].clone()
        heavy[0, 1] = 4.0
        backend.set_model_field("body_mass", torch.tensor([0]), heavy)
        backend.set_state(torch.arange(2), torch.zeros(2, 1), torch.zeros(2, 1))
        for _ in range(10):
            backend.step(torch.ones(2, 1), 1)
        # A unit force for 10 steps of 2 ms: 0.02 m/s at 1 kg, a quarter of it at 4 kg.
        assert torch.allclose(backend.views().qvel[:, 0], torch.tensor([0.005, 0.02])), backend.views().qvel
    finally:
        backend.close()


GEOMLESS_XML = """
<mujoco>
  <worldbody>
    <body name="slider">
      <joint name="x" type="slide" axis="1 0 0"/>
      <inertial pos="0 0 0" mass="1" diaginertia="0.1 0.1 0.1"/>
    </body>
  </worldbody>
  <actuator><motor joint="x"/></actuator>
</mujoco>
"""


def test_a_model_without_geoms_writes_its_empty_friction_and_still_checks_the_rows(tmp_path):
    # The declared friction minimums are checked on the lowest written element; a model without
    # geoms writes none, which is no violation (and no reduction error).
    path = tmp_path / "geomless.xml"
    path.write_text(GEOMLESS_XML)
    b = unisim.create_backend("mujoco", model=str(path), num_envs=2, nthread=1)
    try:
        friction = b.model_field("geom_friction")
        assert friction.shape == (2, 0, 3)
        b.set_model_field("geom_friction", torch.tensor([1]), friction[1:])
        with pytest.raises(unisim.ContractViolation, match=r"rows: expected indices in \[0, 2\)"):
            b.set_model_field("geom_friction", torch.tensor([2]), friction[1:])
    finally:
        b.close()
