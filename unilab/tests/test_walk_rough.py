"""g1_walk_rough: it builds and steps on mujoco and mjwarp (CPU), sees its height scan, starts
envs on their sub-terrains, moves them between levels, sweeps per terrain, and genesis refuses it."""

from __future__ import annotations

import pytest
import torch
from unilab.evaluation import task_evaluation
from unisim import ContractViolation

import unilab

N = 4
NRAY = 17 * 11
# A small grid of 2 levels x one column per type, 4 m sub-terrains: builds in a moment.
SMALL = {"terrain.num_rows": 2, "terrain.num_cols": 7, "terrain.size": (4.0, 4.0), "terrain.border_width": 1.0,
         "terrain.resolution": 0.2}


def columns(env, group: str, term: str) -> slice:
    start = 0
    for name, width in env.observation_manager.describe()[group].items():
        if name == term:
            return slice(start, start + width)
        start += width
    raise KeyError(term)


@pytest.mark.parametrize("backend", ["mujoco", "mjwarp"])
def test_the_rough_task_builds_and_steps_on_the_cpu(make_env, backend):
    if backend == "mjwarp":
        pytest.importorskip("mujoco_warp")
    env = make_env(task="g1_walk_rough", backend=backend, num_envs=N, overrides=SMALL,
                   **({"device": "cpu"} if backend == "mjwarp" else {}))
    flat = make_env(task="g1_walk_flat", num_envs=1)
    assert env.observation_spec["policy"] == flat.observation_spec["policy"] + NRAY
    assert env.observation_spec["critic"] == flat.observation_spec["critic"] + NRAY
    for _ in range(5):
        obs, reward, terminated, truncated, _ = env.step(torch.zeros(N, env.action_dim))
    assert all(bool(torch.isfinite(o).all()) for o in obs.values()) and bool(torch.isfinite(reward).all())


def test_envs_start_on_their_sub_terrain_and_the_critic_reads_the_ground_under_them(make_env):
    env = make_env(task="g1_walk_rough", num_envs=N, overrides={**SMALL, "terrain.max_init_level": 0})
    offset = env.robot.root_pos_w - env.terrain.env_origins
    assert bool((offset[:, :2].abs() <= 0.5 + 1e-6).all()), "within the spawn offset of the origin"
    torch.testing.assert_close(offset[:, 2], torch.full((N,), 0.76))  # the keyframe's base height over the ground
    scan = env.obs["critic"][:, columns(env, "critic", "height_scan")]
    on_flat = env.terrain.types == env.terrain.columns_of("flat")[0]
    assert bool(on_flat.any())
    # Over level ground: the pelvis 0.76 m up, less the 0.5 m offset, on every ray.
    torch.testing.assert_close(scan[on_flat], torch.full_like(scan[on_flat], 0.26), atol=1e-4, rtol=0)


def test_the_height_scan_mirrors_across_the_grid_rows(make_env):
    env = make_env(task="g1_walk_rough", num_envs=N, overrides=SMALL)
    index, sign = env.mirrors["observations"]["critic"]
    cols = columns(env, "critic", "height_scan")
    scan_index = index[cols] - cols.start
    assert torch.equal(scan_index[scan_index], torch.arange(NRAY)), "reflecting twice is the identity"
    assert int(scan_index[0]) == 10 * 17 and bool((sign[cols] == 1).all()), "ray (0, 0) takes ray (0, ny - 1)"


def test_genesis_refuses_the_rough_task_naming_the_height_scan():
    pytest.importorskip("genesis")
    with pytest.raises(ContractViolation, match="HEIGHT_SCAN"):
        unilab.make_manager_based_rl_env("g1_walk_rough", backend="genesis", num_envs=1, device="cpu", overrides=SMALL)


def _place(env, levels: list[int]) -> None:
    env.terrain.levels.copy_(torch.tensor(levels))
    env.terrain.env_origins.copy_(env.terrain.origins[env.terrain.levels, env.terrain.types])


def test_the_curriculum_moves_ended_episodes_up_and_down_a_level(make_env):
    env = make_env(task="g1_walk_rough", num_envs=N, overrides={**SMALL, "terrain.num_rows": 3})
    _place(env, [1, 1, 1, 1])
    term = env.curriculum_manager.terms[0].obj
    qpos = env.robot.qpos.clone()
    walked = torch.tensor([2.5, 0.2, 1.0, 2.5])  # side 4 m: farther than 2 m is up
    term.start.copy_(qpos[:, :2])
    qpos[:, 0] += walked
    env.backend.set_state(torch.arange(N), qpos, torch.zeros_like(env.robot.qvel))
    env.robot.invalidate()
    term.asked.copy_(torch.tensor([1.0, 2.0, 1.0, 1.0]))  # row 1 walked 0.2 of 2.0: down; row 2 1.0 of 1.0: stays
    env.curriculum_manager.reset(torch.tensor([True, True, True, False]))
    assert env.terrain.levels.tolist() == [2, 0, 1, 1]
    torch.testing.assert_close(env.terrain.env_origins, env.terrain.origins[env.terrain.levels, env.terrain.types])


def test_an_episode_that_stood_still_against_its_command_restarts_a_level_easier(make_env):
    env = make_env(task="g1_walk_rough", num_envs=N, overrides={
        **SMALL, "terrain.num_rows": 3, "episode_length_s": 0.2, "commands.twist.lin_vel_x": (1.0, 1.0),
        "commands.twist.lin_vel_y": (0.0, 0.0), "commands.twist.ang_vel_z": (0.0, 0.0),
        "commands.twist.standing_fraction": 0.0, "events.push": None})
    _place(env, [2, 2, 1, 0])
    env.reset()  # a reset outside a step moves no level, and starts on the placed origins
    assert env.terrain.levels.tolist() == [2, 2, 1, 0]
    for _ in range(env.max_episode_length):  # asked 0.2 m, walked ~0: every row ends its episode
        _, _, _, truncated, _ = env.step(torch.zeros(N, env.action_dim))
    assert bool(truncated.all())
    assert env.terrain.levels.tolist() == [1, 1, 0, 0]
    offset = env.robot.root_pos_w[:, :2] - env.terrain.env_origins[:, :2]
    assert bool((offset.abs() <= 0.5 + 1e-6).all()), "the new episodes start on the new levels' origins"


def test_the_rough_sweep_reports_each_terrain_at_its_difficulty(make_env, tmp_path):
    evaluation = task_evaluation("g1_walk_rough", {"envs_per_command": 1, "seconds": 0.3, "settle_s": 0.1,
                                                   "terrains": ["flat", "stairs_up"], "difficulties": [0.5],
                                                   "commands": [(0.5, 0.0, 0.0)]})
    env = make_env(task=evaluation.task, num_envs=evaluation.num_envs(), overrides={"terrain.num_cols": 7})
    report = evaluation.run(env, lambda obs: torch.zeros(env.num_envs, env.action_dim))
    assert set(report["terrains"]) == {"flat", "stairs_up"}
    assert report["terrains"]["stairs_up"]["0.5"]["difficulty"] == pytest.approx(0.5)
    assert [(c["terrain"], c["difficulty"]) for c in report["cases"]] == [("flat", 0.5), ("stairs_up", 0.5)]
    assert set(report["overall"]) == {"flat_passed", "stairs_up_passed"}
    stairs = env.terrain.columns_of("stairs_up")[0]
    assert env.terrain.types.tolist() == [stairs] and env.terrain.levels.tolist() == [1]
    assert "stairs_up @0.50" in evaluation.summary_line(report["cases"][1])
    evaluation.plot({"mujoco": report}, tmp_path / "sweep.png")
    assert (tmp_path / "sweep.png").stat().st_size > 0


def test_mujoco_and_mjwarp_scan_the_same_terrain_alike(make_env):
    pytest.importorskip("mujoco_warp")
    # Every type of the grid (heightfields and boxes) under the same seeded starts.
    envs = [make_env(task="g1_walk_rough", backend=b, num_envs=7, seed=5, overrides={**SMALL, "terrain.max_init_level": 1},
                     **({"device": "cpu"} if b == "mjwarp" else {})) for b in ("mujoco", "mjwarp")]
    scans = [env.robot.height_scan("terrain", "test").hit_z_w for env in envs]
    assert envs[0].terrain.types.tolist() == list(range(7))
    torch.testing.assert_close(scans[1], scans[0], atol=1e-4, rtol=0)
    assert float(scans[0].std()) > 0.01, "the grid is not level everywhere"
