"""Terrains as data: a seeded grid of sub-terrains (rows: difficulty, columns: type).

``TerrainCfg`` (``EnvCfg.terrain``) describes it; ``generate_terrain`` builds its geometry and
spawn origins with torch; ``unilab.assets.terrain_mjcf`` writes it into the scene's MJCF; the
env keeps each env's place on it (``env.terrain``, ``TerrainPlacement``), which the terms in
``unilab.terrains.terms`` (curriculum, reset, metric) read. Terrain geoms are static and in
MJCF geom group ``TERRAIN_GEOM_GROUP``, which a height scan names.
"""

from unilab.terrains.config import SubTerrainCfg, TerrainCfg

TERRAIN_GEOM_GROUP = 2

__all__ = ["TERRAIN_GEOM_GROUP", "SubTerrainCfg", "TerrainCfg"]
