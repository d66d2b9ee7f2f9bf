"""Terrains as data: the seeded generator, each sub-terrain's geometry, the MJCF it becomes, and
the placement the curriculum moves."""

from __future__ import annotations

import math

import mujoco
import numpy as np
import pytest
import torch
from unilab.assets.terrain_mjcf import terrain_spec
from unilab.terrains import TERRAIN_GEOM_GROUP, SubTerrainCfg, TerrainCfg
from unilab.terrains import sub_terrains as st
from unilab.terrains.generator import column_types, generate_terrain
from unilab.terrains.placement import TerrainPlacement

SIZE = (4.0, 4.0)
FLOOR_SCENE = """<mujoco><worldbody><geom name="floor" type="plane" size="0 0 1" friction="0.7 0.01 0.001"/>
<body name="robot" pos="0 0 1"><freejoint/><geom type="sphere" size="0.1"/></body></worldbody></mujoco>"""


def cfg(**changes) -> TerrainCfg:
    base = {"seed": 3, "size": SIZE, "num_rows": 3, "num_cols": 4, "resolution": 0.1, "border_width": 1.0,
            "sub_terrains": {"flat": SubTerrainCfg(func=st.flat, proportion=0.1),
                             "rough": SubTerrainCfg(func=st.random_uniform, proportion=0.3),
                             "stairs": SubTerrainCfg(func=st.pyramid_stairs, proportion=0.3,
                                                     params={"platform_width": 1.0, "border_width": 0.5}),
                             "boxes": SubTerrainCfg(func=st.random_boxes, proportion=0.3)}}
    return TerrainCfg(**{**base, **changes})


def same(a, b) -> bool:
    return (a.names == b.names and torch.equal(a.boxes, b.boxes) and torch.equal(a.origins, b.origins)
            and len(a.heightfields) == len(b.heightfields)
            and all(x[:2] == y[:2] and torch.equal(x[2], y[2]) for x, y in zip(a.heightfields, b.heightfields)))


def test_the_same_seed_gives_the_same_terrain_and_another_seed_another():
    assert same(generate_terrain(cfg()), generate_terrain(cfg()))
    other = generate_terrain(cfg(seed=4))
    assert not torch.equal(other.boxes, generate_terrain(cfg()).boxes)  # the random boxes' tops
    assert not torch.equal(other.heightfields[0][2], generate_terrain(cfg()).heightfields[0][2])  # the rough ground


def test_a_sub_terrain_depends_on_its_seed_and_place_not_on_the_grid_around_it():
    wide = generate_terrain(cfg(num_rows=4))
    narrow = generate_terrain(cfg())
    assert torch.equal(wide.heightfields[0][2], narrow.heightfields[0][2]), "row 0 of the rough column"


def test_rows_are_difficulties_and_columns_types_by_proportion():
    t = generate_terrain(cfg(difficulty_range=(0.2, 0.8)))
    torch.testing.assert_close(t.difficulty, torch.tensor([0.2, 0.5, 0.8]))
    assert t.names == ("flat", "rough", "stairs", "boxes"), "every type gets a column, even a small share"
    assert column_types(cfg(num_cols=7)) == ("flat", "rough", "rough", "stairs", "stairs", "boxes", "boxes")
    # Sub-terrain (r, c) is centred at ((r - 1) * 4, (c - 1.5) * 4): the grid is centred on the world origin.
    torch.testing.assert_close(t.origins[0, 0], torch.tensor([-4.0, -6.0, 0.0]))
    with pytest.raises(ValueError, match="fewer columns than terrain types"):
        cfg(num_cols=3)


def test_stairs_rise_by_one_step_height_per_ring_at_a_difficulty():
    h = 0.05 + (0.25 - 0.05) * 0.5  # step_height_range at difficulty 0.5
    part = st.pyramid_stairs(0.5, (8.0, 8.0), 0.1, torch.Generator(), step_height_range=(0.05, 0.25),
                             step_width=0.5, platform_width=2.0, border_width=1.0)
    tops = sorted({round(float(z + hz), 6) for z, hz in zip(part.boxes[:, 2], part.boxes[:, 5])})
    n = math.floor((4.0 - 1.0 - 1.0) / 0.5)  # rings between the frame and the platform
    assert tops == pytest.approx([k * h for k in range(n + 2)])  # ground, n rings, the platform
    assert float(part.origin[2]) == pytest.approx((n + 1) * h)
    pit = st.pyramid_stairs(0.5, (8.0, 8.0), 0.1, torch.Generator(), step_height_range=(0.05, 0.25),
                            step_width=0.5, platform_width=2.0, border_width=1.0, inverted=True)
    tops = sorted({round(float(z + hz), 6) for z, hz in zip(pit.boxes[:, 2], pit.boxes[:, 5])})
    assert tops == pytest.approx([-k * h for k in range(n + 2)][::-1])
    assert float(pit.origin[2]) == pytest.approx(-(n + 1) * h)


def test_a_slope_rises_at_the_angle_its_difficulty_gives():
    part = st.pyramid_slope(0.5, (8.0, 8.0), 0.1, torch.Generator(), slope_range=(0.0, 0.6), platform_width=2.0)
    row = part.heights[part.heights.shape[0] // 2]  # y = 0, x from -4 to 4
    gradient = (row[10] - row[0]) / 1.0  # 1 m in from the -x edge
    assert math.degrees(math.atan(float(gradient))) == pytest.approx(math.degrees(math.atan(0.3)), abs=1e-3)
    assert float(row[0]) == pytest.approx(0.0, abs=1e-6), "the edges meet the ground"
    assert float(part.origin[2]) == pytest.approx(0.3 * 3.0) and float(row.max()) == pytest.approx(0.9, abs=1e-5)
    pit = st.pyramid_slope(0.5, (8.0, 8.0), 0.1, torch.Generator(), slope_range=(0.0, 0.6), inverted=True)
    assert float(pit.heights.min()) == pytest.approx(-0.9, abs=1e-5)


def test_rough_and_boxes_stay_within_their_difficultys_heights():
    g = torch.Generator().manual_seed(0)
    rough = st.random_uniform(1.0, SIZE, 0.1, g, noise_range=(0.02, 0.08), noise_step=0.02)
    assert float(rough.heights.abs().max()) <= 0.08 + 1e-6 and float(rough.heights.std()) > 0.01
    easy = st.random_uniform(0.0, SIZE, 0.1, g, noise_range=(0.02, 0.08), noise_step=0.02)
    assert float(easy.heights.abs().max()) <= 0.02 + 1e-6
    boxes = st.random_boxes(0.5, SIZE, 0.1, g, height_range=(0.0, 0.2), grid_width=0.5, platform_width=1.0)
    tops = boxes.boxes[:, 2] + boxes.boxes[:, 5]
    assert float(tops.abs().max()) <= 0.1 + 1e-6
    central = (boxes.boxes[:, 0].abs() < 0.5) & (boxes.boxes[:, 1].abs() < 0.5)
    assert torch.all(tops[central] == 0.0), "the platform is level"


def test_the_mjcf_replaces_the_floor_and_rays_read_the_generated_heights(tmp_path):
    terrain = generate_terrain(cfg())
    path = tmp_path / "scene.xml"
    path.write_text(FLOOR_SCENE)
    spec = terrain_spec(path, terrain)
    m = spec.compile()
    assert mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, "floor") == -1
    world = [g for g in range(m.ngeom) if m.geom_bodyid[g] == 0]
    assert world and all(m.geom_group[g] == TERRAIN_GEOM_GROUP for g in world)
    assert all(m.geom_friction[g][0] == pytest.approx(0.7) for g in world), "the floor's contact properties"
    d = mujoco.MjData(m)
    mujoco.mj_kinematics(m, d)
    cx, cy, heights = terrain.heightfields[0]  # the rough sub-terrain of row 0
    gid = np.zeros(1, dtype=np.int32)
    groups = np.array([g == TERRAIN_GEOM_GROUP for g in range(6)], dtype=np.uint8)
    for iy, ix in ((5, 7), (20, 33), (35, 12)):  # inside: an edge sample is shared with the neighbour
        x, y = cx - SIZE[0] / 2 + ix * 0.1, cy - SIZE[1] / 2 + iy * 0.1
        z = 5.0 - mujoco.mj_ray(m, d, np.array([x, y, 5.0]), np.array([0.0, 0.0, -1.0]), groups, 1, -1, gid)
        assert z == pytest.approx(float(heights[iy, ix]), abs=1e-4)
    with pytest.raises(ValueError, match="no geom 'ground'"):
        terrain_spec(path, generate_terrain(cfg(replaces_geom="ground")))


def test_placement_moves_ended_rows_up_down_and_wraps_past_the_hardest():
    placement = TerrainPlacement(generate_terrain(cfg()), 8, torch.device("cpu"), torch.Generator().manual_seed(0))
    assert placement.types.tolist() == [0, 0, 1, 1, 2, 2, 3, 3], "envs spread over the columns in blocks"
    placement.levels.copy_(torch.tensor([0, 1, 2, 1, 0, 2, 1, 1]))
    done = torch.tensor([True, True, True, True, True, False, True, False])
    up = torch.tensor([True, False, True, False, False, True, False, True])
    down = torch.tensor([False, True, False, False, True, False, False, False])
    placement.move(done, up, down, torch.Generator().manual_seed(1))
    levels = placement.levels.tolist()
    assert levels[:2] == [1, 0] and levels[3:] == [1, 0, 2, 1, 1]  # up, down, kept, floored at 0, not done x2
    assert 0 <= levels[2] <= 2, "past the hardest level: a random level"
    torch.testing.assert_close(placement.env_origins, placement.origins[placement.levels, placement.types])
