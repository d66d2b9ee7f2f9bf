"""``unilab-bench peer``: another project's own G1 flat-velocity env, timed like ours.

    unilab-bench peer --project mjlab|unilab-1.5.2 --site DIR [--python PY] --num-envs 4096 --device cuda \\
        --steps N --samples 3 --out OUT.json [--record STORE]
    unilab-bench peer add OUT.json [--record STORE] [--caches warm|cold]

The peer runs in its own Python environment: ``--python`` (default ``python3``) runs
``unilab_bench/peers/driver.py`` by path with PYTHONPATH set to the ``--site`` folder(s) alone (any
PYTHONPATH of the calling shell, e.g. our own simulators', is dropped) and no user site. The driver
builds the peer's env as its users do, warms it up, then times ``--steps`` streamed env steps with
zero actions and as many with random actions in each of ``--samples`` interleaved rounds (the
device synchronized before every clock read) and writes its JSON; this command adds what ran it
(the command, our commit, the machine) and writes ``--out``. ``--record STORE`` appends a compact
``env`` record naming the project (``unilab_bench.peers.record``). ``peer add`` appends the record of
a JSON written elsewhere (e.g. on the GPU machine, whose store copy does not come back).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from unilab_rl.machine_info import machine

from unilab_bench.matrix_trees import git_commit
from unilab_bench.peers import driver
from unilab_bench.peers.record import peer_record
from unilab_bench.results.cli import check_target, record_to
from unilab_bench.results.records import command_line
from unilab_bench.results.store import STORE

DRIVER = Path(driver.__file__).resolve()
# The driver's options this command passes through unchanged.
PASSED = ("project", "num_envs", "device", "steps", "samples", "warmup", "seed", "sim")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="unilab-bench peer", description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("--project", required=True, help=f"one of {', '.join(driver.PROJECTS)}")
    p.add_argument("--site", action="append", default=[], metavar="DIR",
                   help="a folder the peer's wheels are installed in (repeatable; PYTHONPATH, in this order)")
    p.add_argument("--python", default="python3", help="the interpreter of the peer's environment (default python3)")
    p.add_argument("--num-envs", type=int, default=4096)
    p.add_argument("--device", default="cuda", help="cpu, cuda or cuda:N (default cuda)")
    p.add_argument("--steps", type=int, default=100, help="env steps per timed sample (default 100)")
    p.add_argument("--samples", type=int, default=3, help="interleaved rounds, zero then random actions (default 3)")
    p.add_argument("--warmup", type=int, default=20, help="env steps per policy before timing (default 20)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--sim", default=None,
                   help="unilab-1.5.2: mjwarp (default, CUDA only) or mujoco (its CPU host backend)")
    p.add_argument("--timeout", type=float, default=None, metavar="S", help="give up on the driver after S seconds")
    p.add_argument("--out", required=True, type=Path, help="write the JSON record here")
    p.add_argument("--record", type=Path, default=None, metavar="STORE",
                   help="also append a compact record to this results store (e.g. results/records.jsonl)")
    return p


def check(args: argparse.Namespace) -> list[str]:
    """Everything wrong with the arguments, before the peer's environment is touched."""
    problems = driver.check_args(argparse.Namespace(**{k: getattr(args, k) for k in PASSED}, site=args.site))
    problems += [f"--site {site}: not a folder" for site in args.site if not Path(site).is_dir()]
    if shutil.which(args.python) is None:
        problems.append(f"--python {args.python}: not an executable")
    if args.timeout is not None and args.timeout <= 0:
        problems.append(f"--timeout {args.timeout}: seconds > 0")
    if args.out.is_dir():
        problems.append(f"--out {args.out}: a folder, not a file")
    try:
        check_target(args.record)
    except ValueError as error:
        problems.append(str(error))
    return problems


def peer_env(sites: list[str], base: dict[str, str] | None = None) -> dict[str, str]:
    """The driver's environment: ours, with PYTHONPATH the peer's sites alone and no user site."""
    env = dict(os.environ if base is None else base)
    env["PYTHONPATH"] = os.pathsep.join(str(Path(s).resolve()) for s in sites)
    env["PYTHONNOUSERSITE"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    env.pop("PYTHONHOME", None)
    return env


def driver_argv(args: argparse.Namespace, out: Path) -> list[str]:
    argv = [args.python, str(DRIVER)]
    for name in PASSED:
        value = getattr(args, name)
        if value is not None:
            argv += [f"--{name.replace('_', '-')}", str(value)]
    for site in args.site:
        argv += ["--site", str(Path(site).resolve())]
    return [*argv, "--out", str(out)]


def run(args: argparse.Namespace) -> dict:
    with tempfile.TemporaryDirectory(prefix="unilab-bench-peer-") as tmp:
        out = Path(tmp) / "driver.json"
        argv = driver_argv(args, out)
        print("unilab-bench peer: " + " ".join(argv), flush=True)
        try:
            proc = subprocess.run(argv, env=peer_env(args.site), timeout=args.timeout, check=False)
        except subprocess.TimeoutExpired as error:
            raise SystemExit(f"unilab-bench peer: the driver ran past --timeout {args.timeout} s") from error
        if proc.returncode != 0 or not out.is_file():
            raise SystemExit(f"unilab-bench peer: the driver exited {proc.returncode} without a record")
        full = json.loads(out.read_text())
    full.update({"command": command_line(), "git_commit": git_commit(), "machine": machine(),
                 "site": [str(Path(s).resolve()) for s in args.site]})
    return full


def write(full: dict, out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(full, indent=2, default=str) + "\n")


def add(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="unilab-bench peer add", description="append the store record of a peer JSON")
    p.add_argument("file", type=Path, metavar="OUT.json")
    p.add_argument("--record", type=Path, default=STORE, help=f"the store (default {STORE})")
    p.add_argument("--caches", choices=("warm", "cold"), help="whether the peer's kernel caches were warm")
    args = p.parse_args(argv)
    try:
        record = peer_record(json.loads(args.file.read_text()), caches=args.caches, source=str(args.file))
    except (OSError, ValueError) as error:
        p.error(str(error))
    record_to(args.record, record)
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] == "add":
        return add(argv[1:])
    p = build_parser()
    args = p.parse_args(argv)
    problems = check(args)
    if problems:
        p.error("; ".join(problems))
    full = run(args)
    write(full, args.out)
    rates = full["env_steps_per_s"]
    name = full["project"] if full["version"] in full["project"] else f"{full['project']} {full['version']}"
    print(f"unilab-bench peer: {name} {full['task']} on {full['gpu'] or full['device']}, "
          f"{full['num_envs']} envs: " + ", ".join(f"{k} {v['median']:.0f} env-steps/s" for k, v in rates.items())
          + f"; wrote {args.out}")
    record_to(args.record, peer_record(full, source=str(args.out)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
