"""Motion clips (leaf I/O): the canonical clip the tracking task reads, its file, importers and checks.

Public API: ``MotionClip``; ``load_clip(path)`` / ``save_clip(clip, path)`` (the canonical
``.npz``); ``pinned_clip_paths()`` (the 18 pinned real clips); ``load_library(paths_or_names,
weights)`` (a ``MotionLibrary``); ``import_motion(path, ...)`` (CSV / named NPZ / mjlab NPZ);
``export_csv(clip, path)``; ``check_clip(clip)`` (a ``CheckReport``). Command line: ``unilab-motion``.
"""

from unilab.assets.motion.check import CheckReport, check_clip
from unilab.assets.motion.clip import CLIP_FORMAT_VERSION, MotionClip
from unilab.assets.motion.importers import ImportReport, export_csv, import_motion, import_motion_with_report
from unilab.assets.motion.io import MotionDataError, load_clip, save_clip
from unilab.assets.motion.library import MotionLibrary, load_library
from unilab.assets.motion.pinned import PINNED_CLIP_GROUPS, fetch_pinned_clips, pinned_clip_paths

__all__ = ["CLIP_FORMAT_VERSION", "PINNED_CLIP_GROUPS", "CheckReport", "ImportReport", "MotionClip",
           "MotionDataError", "MotionLibrary", "check_clip", "export_csv", "fetch_pinned_clips", "import_motion",
           "import_motion_with_report", "load_clip", "load_library", "pinned_clip_paths", "save_clip"]
