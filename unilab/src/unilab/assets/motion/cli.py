"""``unilab-motion``: import motion files to the canonical clip, check clips, fetch the pinned ones.

Exit codes: 0 done / every clip passed; 1 a clip failed ``check``; 2 bad input (malformed or
unreadable file, bad option): the message names the problem and nothing is written. ``check``
reports every clip given, an unreadable one included, and exits with the worst code.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from unilab.assets.motion.check import check_clip
from unilab.assets.motion.importers import DEFAULT_CSV_FPS, DEFAULT_OUTPUT_FPS, export_csv, import_motion_with_report
from unilab.assets.motion.io import MotionDataError, load_clip, save_clip, write_atomically
from unilab.assets.motion.library import resolve_clip
from unilab.assets.motion.pinned import PINNED_CLIP_GROUPS, motion_root, pinned_clip_paths


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="unilab-motion", description="Import motion files to canonical G1 clips, "
                                "check clips, fetch the pinned ones.")
    sub = p.add_subparsers(dest="cmd", required=True)
    imp = sub.add_parser("import", help="convert a CSV / NPZ motion to a canonical clip")
    imp.add_argument("source", type=Path, help=".csv (root xyz, quat xyzw, 29 joints) or .npz (mjlab, BeyondMimic, "
                     "holosoma, qpos-only or canonical; bodies the model lacks are ignored)")
    imp.add_argument("-o", "--out", type=Path, required=True, help="canonical clip to write (.npz)")
    imp.add_argument("--fps", type=float, default=None,
                     help=f"source rate (CSV default {DEFAULT_CSV_FPS:g}; NPZ: its own fps)")
    # Default None, not 50: an explicit --out-fps on NPZ input (which keeps its rate) is refused, never ignored.
    imp.add_argument("--out-fps", type=float, default=None,
                     help=f"output rate for CSV input (default {DEFAULT_OUTPUT_FPS:g}); refused for NPZ (keeps its rate)")
    imp.add_argument("--name", default=None, help="clip name (default: the source's file stem)")
    imp.add_argument("--overwrite", action="store_true", help="replace an existing output file")
    chk = sub.add_parser("check", help="check canonical clips against the G1 model; exit 1 if one fails")
    chk.add_argument("clips", nargs="*", type=Path, help="canonical clip files")
    chk.add_argument("--pinned", action="store_true", help="check the pinned clips too")
    chk.add_argument("--json", type=Path, default=None, help="also write the reports as JSON")
    exp = sub.add_parser("export-csv", help="write a clip's root pose and joints as an importable CSV")
    exp.add_argument("clip", help="a canonical clip file or a pinned clip name (`unilab-motion list`)")
    exp.add_argument("out", type=Path, metavar="OUT", help="CSV file to write")
    sub.add_parser("fetch", help="download and convert the pinned clips into the cache (make install)")
    sub.add_parser("list", help="the pinned clips and their files")
    return p


def check_out_path(path: Path, flag: str) -> None:
    """Refuse, before any work, an output path that cannot be written: a directory, or one under a
    file, or an existing path that is not a regular file (a FIFO, a device node, a link: the atomic
    write's rename would replace it). Missing parent folders are fine (the atomic write creates them)."""
    if path.is_symlink() or (path.exists() and not path.is_dir() and not path.is_file()):
        what = "a symbolic link" if path.is_symlink() else "a special file (FIFO, device or socket)"
        raise MotionDataError(f"{flag} {path}: is not a regular file but {what}, which writing would replace; "
                              "give a new path or a regular file")
    if path.is_dir():
        raise MotionDataError(f"{flag} {path}: is a directory; give a file path")
    parent = path.parent
    while not parent.exists() and parent != parent.parent:  # the nearest existing folder decides
        parent = parent.parent
    if not parent.is_dir():
        raise MotionDataError(f"{flag} {path}: {parent} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise MotionDataError(f"{flag} {path}: {parent} is not writable")


def _write(path: Path, flag: str, write) -> None:
    """``write()``, with an OS error (disk full, a race with the checks above) a refusal naming ``flag``."""
    try:
        write()
    except OSError as exc:
        raise MotionDataError(f"{flag} {path}: cannot write ({exc})") from exc


def _import(args) -> int:
    if args.out.suffix != ".npz":
        raise MotionDataError(f"--out {args.out}: a clip file must end in .npz")
    check_out_path(args.out, "--out")
    if args.out.exists() and not args.overwrite:
        raise MotionDataError(f"--out {args.out} exists; pass --overwrite to replace it")
    clip, report = import_motion_with_report(args.source, fps=args.fps, out_fps=args.out_fps, name=args.name)
    _write(args.out, "--out", lambda: save_clip(clip, args.out))
    print(f"wrote {args.out}: clip {clip.name!r}, {clip.num_frames} frames at {clip.fps:g} fps "
          f"({clip.duration_s:.2f} s); check it with `unilab-motion check {args.out}`")
    for line in report.lines():
        print(f"  {line}")
    return 0


def _check(args) -> int:
    paths = list(args.clips)
    if args.pinned:
        paths += list(pinned_clip_paths().values())
    if not paths:
        raise MotionDataError("give clip files or --pinned")
    if args.json:
        check_out_path(args.json, "--json")
    entries = [_check_one(p) for p in paths]
    failed = [e["clip"] for e in entries if not e["ok"] and "unreadable" not in e]
    unreadable = [e["path"] for e in entries if "unreadable" in e]
    passed = len(entries) - len(failed) - len(unreadable)
    print(f"{passed}/{len(entries)} clips passed" + (f"; failed: {failed}" if failed else "") +
          (f"; unreadable: {unreadable}" if unreadable else ""))
    if args.json:
        text = json.dumps(entries, indent=2).encode()
        _write(args.json, "--json", lambda: write_atomically(args.json, lambda f: f.write(text)))
    return 2 if unreadable else 1 if failed else 0  # the worst: 2 bad input, 1 a clip failed


def _check_one(path: Path) -> dict:
    """Check one clip file and print its report. An unreadable file is reported (stderr and the
    report) and the others are still checked, so one bad file does not hide the rest."""
    try:
        report = check_clip(load_clip(path))
    except MotionDataError as exc:
        print(f"clip {path}\nUNREADABLE: {exc}")
        print(f"unilab-motion check: {exc}", file=sys.stderr)
        return {"clip": str(path), "path": str(path), "ok": False, "unreadable": str(exc), "measures": {},
                "items": []}
    print(report.format())
    return {**report.to_dict(), "path": str(path)}


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.cmd == "import":
            return _import(args)
        if args.cmd == "check":
            return _check(args)
        if args.cmd == "export-csv":
            check_out_path(args.out, "OUT")
            clip = load_clip(resolve_clip(args.clip))
            _write(args.out, "OUT", lambda: export_csv(clip, args.out))
            print(args.out)
            return 0
        if args.cmd == "fetch":
            pinned_clip_paths()
            print(motion_root())
            return 0
        for name, path in pinned_clip_paths(fetch=False).items():
            print(f"{name:36s} {PINNED_CLIP_GROUPS[name]:10s} {path}")
        return 0
    except MotionDataError as exc:
        print(f"unilab-motion {args.cmd}: {exc}", file=sys.stderr)
        return 2
    except (FileNotFoundError, RuntimeError) as exc:
        print(f"unilab-motion {args.cmd}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
