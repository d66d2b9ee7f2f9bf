"""A generated terrain written into a scene's MJCF (asset authoring: MuJoCo's MjSpec, NumPy).

The terrain replaces the scene's ground geom (``TerrainCfg.replaces_geom``, the G1 scene's
"floor") and takes its contact properties (friction, condim, contact bits, priority, solver
parameters). Boxes become box geoms and heightfield sub-terrains heightfield assets with their
geoms, all on the world body, in ``TERRAIN_GEOM_GROUP``. The result is written once per content
to the asset cache, like the G1 scene.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import mujoco

from unilab.assets.robot_files import asset_root
from unilab.terrains import TERRAIN_GEOM_GROUP
from unilab.terrains.generator import Terrain

HFIELD_BASE = 1.0  # metres of solid under a heightfield's lowest point
_CONTACT = ("friction", "condim", "contype", "conaffinity", "priority", "solref", "solimp", "margin", "gap")
_COLORS = ((0.46, 0.50, 0.55, 1.0), (0.55, 0.52, 0.46, 1.0))


def terrain_spec(scene: str | Path, terrain: Terrain) -> mujoco.MjSpec:
    """``scene`` (an MJCF path) with its ground geom replaced by ``terrain``."""
    spec = mujoco.MjSpec.from_file(str(scene))
    name = terrain.cfg.replaces_geom
    ground = next((g for g in spec.geoms if g.name == name), None)
    if ground is None:
        raise ValueError(f"terrain.replaces_geom: the scene {Path(scene).name} has no geom {name!r}; geoms of its world "
                         f"body: {[g.name for g in spec.worldbody.geoms]}")
    contact = {key: getattr(ground, key) for key in _CONTACT}
    spec.delete(ground)
    world = spec.worldbody
    for i, (cx, cy, cz, hx, hy, hz) in enumerate(terrain.boxes.tolist()):
        geom = world.add_geom(name=f"terrain_box_{i}", type=mujoco.mjtGeom.mjGEOM_BOX, size=[hx, hy, hz],
                              pos=[cx, cy, cz], group=TERRAIN_GEOM_GROUP, rgba=_COLORS[i % 2])
        _set(geom, contact)
    for i, (cx, cy, heights) in enumerate(terrain.heightfields):
        data = heights.double().numpy()
        low, high = float(data.min()), float(data.max())
        elevation = max(high - low, 1e-6)  # MuJoCo needs a positive range; a level field is flat at ``low``
        name = f"terrain_hfield_{i}"
        spec.add_hfield(name=name, nrow=data.shape[0], ncol=data.shape[1],
                        size=[terrain.cfg.size[0] / 2, terrain.cfg.size[1] / 2, elevation, HFIELD_BASE],
                        userdata=((data - low) / elevation).ravel().tolist())
        geom = world.add_geom(name=f"terrain_hfield_geom_{i}", type=mujoco.mjtGeom.mjGEOM_HFIELD, hfieldname=name,
                              pos=[cx, cy, low], group=TERRAIN_GEOM_GROUP, rgba=_COLORS[(i + 1) % 2])
        _set(geom, contact)
    return spec


def _set(geom, contact: dict) -> None:
    for key, value in contact.items():
        setattr(geom, key, value)


def terrain_scene_path(scene: str | Path, terrain: Terrain) -> Path:
    """Write (once per content) and return the MJCF of ``scene`` standing on ``terrain``."""
    xml = terrain_spec(scene, terrain).to_xml()
    digest = hashlib.sha256(xml.encode()).hexdigest()[:12]
    path = asset_root() / f"{Path(scene).stem}_terrain_{digest}.xml"
    if not path.is_file():
        tmp = path.with_suffix(f".{os.getpid()}.tmp")  # one per writing process
        tmp.write_text(xml)
        tmp.replace(path)
    return path
