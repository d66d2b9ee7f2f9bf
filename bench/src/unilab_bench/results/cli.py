"""``unilab-bench results``: the results store and the docs generated from it.

    unilab-bench results add-run RUN_DIR [--record PATH] [--caches warm|cold] [--entry LABEL]
    unilab-bench results add FILE.json ... [--record PATH] [--caches warm|cold] [--source TEXT]
    unilab-bench results render [--store PATH]
    unilab-bench results check [--store PATH]

``add-run`` turns a finished ``unilab-train --eval`` run (``summary.json``, ``run.json``, ``eval/``,
``eval-latest-actor/``; a ``--seeds`` folder gives one record per seed) into training records;
``add`` turns the JSON an env, collector or matrix benchmark wrote (``--out``/``--json``) into one
record each. ``--caches`` says whether the simulator's kernels and torch.compile's graphs were
cached by an earlier run on the machine (a run cannot tell). ``render`` rewrites docs/results.md
and the README's results table; ``check`` exits 1 where either no longer reads what the store
gives, or where README.md or docs/*.md types a figure outside them that no record backs.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from unilab_bench.results import claims, records, render, store


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="unilab-bench results", description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n", 1)[1])
    sub = p.add_subparsers(dest="what", required=True)
    add_run = sub.add_parser("add-run", help="training records of a finished unilab-train --eval run")
    add_run.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    add_run.add_argument("--entry", help="what the run trained as, for the tables' grouping "
                                         "(default: PRESET/ALGO and the overrides it added)")
    add = sub.add_parser("add", help="one record per benchmark JSON (unilab-bench env, collector, matrix)")
    add.add_argument("files", type=Path, nargs="+", metavar="FILE.json")
    add.add_argument("--source", help="where the JSON came from (default: its path)")
    for command in (add_run, add):
        command.add_argument("--record", type=Path, default=store.STORE, help=f"the store (default {store.STORE})")
        command.add_argument("--caches", choices=("warm", "cold"), help="whether kernel and compile caches were warm")
    for name, what in (("render", "regenerate docs/results.md and the README's results table"),
                       ("check", "exit 1 where a generated section is stale or a hand-typed figure has no record")):
        command = sub.add_parser(name, help=what)
        command.add_argument("--store", type=Path, default=store.STORE, help=f"the store (default {store.STORE})")
        command.add_argument("--root", type=Path, default=store.ROOT, help="the checkout whose docs are generated")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.what == "add-run":
            made = records.run_records(args.run_dir, entry=args.entry, caches=args.caches)
            return _append(args.record, made)
        if args.what == "add":
            made = [records.bench_record(json.loads(path.read_text()), caches=args.caches,
                                         source=args.source or str(path)) for path in args.files]
            return _append(args.record, made)
        kept = store.read(args.store)
        if args.what == "render":
            changed = render.write(args.root, kept)
            print(f"unilab-bench results: {len(kept)} records; "
                  + (f"rewrote {', '.join(str(p.relative_to(args.root)) for p in changed)}" if changed
                     else "docs already up to date"))
            return 0
        return check(args.root, kept)
    except (OSError, ValueError, KeyError) as error:
        print(f"unilab-bench results: error: {error}", file=sys.stderr)
        return 2


def _append(path: Path, made: list[dict]) -> int:
    for record in made:
        store.append(path, record)
        print(f"unilab-bench results: appended {record['id']} to {path}")
    return 0


def check(root: Path, kept: list[dict]) -> int:
    """0 when the generated sections read what the store gives and every hand-typed figure has a
    record; else 1, naming each stale file and each figure."""
    problems = [f"{path.relative_to(root)}: stale, run `unilab-bench results render`"
                for path in render.stale(root, kept)]
    problems += claims.unbacked(root, kept)
    for problem in problems:
        print(f"unilab-bench results: {problem}", file=sys.stderr)
    if not problems:
        print(f"unilab-bench results: {len(kept)} records; the generated docs and every figure typed by hand agree")
    return 1 if problems else 0


def check_target(path: Path | None) -> None:
    """``--record PATH``, checked before a benchmark runs: a readable store, or none yet where a
    file can be made (ValueError naming the problem)."""
    if path is None:
        return
    folder = next((p for p in [path.parent, *path.parent.parents] if p.exists()), None)
    if path.is_dir() or folder is None or not folder.is_dir():
        raise ValueError(f"--record {path}: not a file in a folder")
    try:
        store.read(path)
    except (OSError, ValueError) as error:
        raise ValueError(f"--record {path}: {error}") from error


def record_to(path: Path | None, record: dict) -> None:
    """``--record PATH`` of the benchmark commands: append their compact record and say so."""
    if path is None:
        return
    try:
        store.append(path, record)
    except (OSError, ValueError) as error:
        raise SystemExit(f"--record {path}: {error}") from error
    print(f"unilab-bench: appended {record['id']} to {path}")
