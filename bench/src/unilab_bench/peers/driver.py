"""Step another project's own G1 flat-velocity env and time it: the driver of ``unilab-bench peer``.

Run by path in the peer's own Python environment (its simulator versions conflict with ours), with
PYTHONPATH naming the peer's site folder(s)::

    PYTHONPATH=/tmp/site-mjlab python3 driver.py --project mjlab --num-envs 4096 --device cuda \
        --steps 100 --samples 3 --out peer.json --site /tmp/site-mjlab

It imports the standard library, torch and the peer, nothing of ours (``unilab`` here is the peer
unilab 1.5.2 from PyPI, found in ``--site``; the driver refuses a module found anywhere else). Each
peer's env is built as its users build it:

- ``mjlab`` 1.6.0: the registered ``Mjlab-Velocity-Flat-Unitree-G1`` task's training env config
  (``mjlab.tasks.registry.load_env_cfg``) and ``ManagerBasedRlEnv(cfg, device)``, as mjlab's
  ``train`` script builds it; its ``Simulation`` captures a CUDA graph of one physics step by default.
- ``unilab-1.5.2``: the G1 walking task of ``train --algo sac --task g1_walk_flat --sim mjwarp``:
  Hydra composes ``conf/sac/config.yaml`` with ``task=g1_walk_flat/<sim>``, the env override is built
  by the same functions the training script calls, and ``unilab.base.env_factory.make_registry_env``
  makes the env. Its configs name the scene relative to a source checkout
  (``src/unilab/assets/...``), so the driver runs from a scratch folder whose ``src/unilab`` links to
  the installed package. Its mjwarp backend is CUDA-only by design (it refuses a CPU device); on a
  CPU, ``--sim mujoco`` builds the same task on its MuJoCo host backend.

Method: warm-up first (``--warmup`` steps with zero actions, then as many with random ones: kernel
compiles, graph capture), then ``--samples`` interleaved rounds, each timing ``--steps`` env steps with
zero actions and then ``--steps`` with random actions (uniform in [-1, 1], a pool of 8 drawn once),
streamed: the device is synchronized before every clock read and nowhere else. Env-steps/s =
num_envs * steps / seconds, per sample; the record gives min/median/max and every sample.
"""

from __future__ import annotations

import argparse
import atexit
import importlib
import importlib.metadata
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

PROJECTS = {
    "mjlab": {"distribution": "mjlab", "version": "1.6.0", "module": "mjlab",
              "task": "Mjlab-Velocity-Flat-Unitree-G1", "sims": ("mjwarp",), "cpu_sims": ("mjwarp",),
              "ours": "g1_walk_flat"},
    "unilab-1.5.2": {"distribution": "unilab", "version": "1.5.2", "module": "unilab",
                     "task": "g1_walk_flat", "algo": "sac", "sims": ("mjwarp", "mujoco"),
                     # its mjwarp backend is CUDA-only by design (refuses a CPU device)
                     "cpu_sims": ("mujoco",), "ours": "g1_walk_flat"},
}
# The simulator packages whose versions every record carries (as installed where the peer ran).
VERSIONED = ("torch", "mujoco", "mujoco-warp", "warp-lang", "numpy")
POOL = 8  # random action tensors drawn once, cycled through


def check_args(args: argparse.Namespace) -> list[str]:
    """What is wrong with the arguments (empty when nothing is), before anything is imported."""
    problems = []
    project = PROJECTS.get(args.project)
    if project is None:
        problems.append(f"--project {args.project!r}: one of {', '.join(PROJECTS)}")
    for name in ("num_envs", "steps", "samples"):
        value = getattr(args, name)
        if not isinstance(value, int) or value < 1:
            problems.append(f"--{name.replace('_', '-')} {value!r}: a whole number >= 1")
    if not isinstance(args.warmup, int) or args.warmup < 0:
        problems.append(f"--warmup {args.warmup!r}: a whole number >= 0")
    if not isinstance(args.seed, int) or args.seed < 0:
        problems.append(f"--seed {args.seed!r}: a whole number >= 0")
    device = str(args.device)
    if device != "cpu" and not (device == "cuda" or (device.startswith("cuda:") and device[5:].isdigit())):
        problems.append(f"--device {device!r}: cpu, cuda or cuda:N")
    if project is not None:
        sim = args.sim or project["sims"][0]
        if sim not in project["sims"]:
            problems.append(f"--sim {sim!r}: {args.project} steps one of {', '.join(project['sims'])}")
        elif device == "cpu" and sim not in project["cpu_sims"]:
            problems.append(f"--device cpu: {args.project}'s {sim} backend is CUDA-only (it refuses a CPU device); "
                            f"on a CPU use --sim {' or '.join(project['cpu_sims'])}")
    if not args.site:
        problems.append("--site: the folder(s) the peer is installed in (its modules must come from there)")
    return problems


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="driver.py", description=__doc__.split("\n")[0])
    p.add_argument("--project", required=True, help=f"one of {', '.join(PROJECTS)}")
    p.add_argument("--num-envs", type=int, default=4096)
    p.add_argument("--device", default="cuda", help="cpu, cuda or cuda:N")
    p.add_argument("--steps", type=int, default=100, help="env steps per timed sample")
    p.add_argument("--samples", type=int, default=3, help="interleaved rounds (zero actions, then random)")
    p.add_argument("--warmup", type=int, default=20, help="env steps before timing, per policy")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--sim", default=None, help="unilab-1.5.2: mjwarp (default) or mujoco (its CPU host backend)")
    p.add_argument("--site", action="append", default=[],
                   help="a folder the peer is installed in (repeatable); its modules must come from one")
    p.add_argument("--out", required=True, help="write the JSON record here")
    return p


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = build_parser()
    args = p.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # as given, for the record
    problems = check_args(args)
    if problems:
        p.error("; ".join(problems))
    if args.device == "cuda":
        args.device = "cuda:0"
    args.sim = args.sim or PROJECTS[args.project]["sims"][0]
    args.out = str(Path(args.out).resolve())  # the unilab builder changes the working folder
    args.site = [str(Path(s).resolve()) for s in args.site]
    return args


def _inside(path: str | None, folders: list[str]) -> bool:
    if not path:
        return False
    resolved = Path(path).resolve()
    return any(resolved.is_relative_to(Path(f).resolve()) for f in folders)


def import_peer(project: str, sites: list[str]):
    """The peer's top module, refused unless it comes from one of ``sites`` at the expected version."""
    spec = PROJECTS[project]
    module = importlib.import_module(spec["module"])
    if not _inside(getattr(module, "__file__", None), sites):
        raise SystemExit(f"driver: {spec['module']} was imported from {getattr(module, '__file__', None)}, not from "
                         f"{', '.join(sites)}: PYTHONPATH must put the peer's site first")
    version = importlib.metadata.version(spec["distribution"])
    if version != spec["version"]:
        raise SystemExit(f"driver: {spec['distribution']} {version} is installed, not {spec['version']}")
    return module


def versions() -> dict[str, str | None]:
    found = {"python": platform.python_version()}
    for name in VERSIONED:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = None
    return found


def _enum(value) -> str:
    return getattr(value, "name", str(value)).removeprefix("mjSOL_").removeprefix("mjCONE_").removeprefix("mjINT_").lower()


def physics_of(model, decimation: int | None) -> dict:
    """The MuJoCo options the env runs with, read from its compiled MjModel."""
    import mujoco

    opt = model.opt
    return {"timestep": float(opt.timestep), "decimation": decimation,
            "env_dt": None if decimation is None else float(opt.timestep) * decimation,
            "solver": _enum(mujoco.mjtSolver(opt.solver)), "iterations": int(opt.iterations),
            "ls_iterations": int(opt.ls_iterations), "tolerance": float(opt.tolerance),
            "cone": _enum(mujoco.mjtCone(opt.cone)), "integrator": _enum(mujoco.mjtIntegrator(opt.integrator)),
            "ccd_iterations": int(getattr(opt, "ccd_iterations", -1)), "nq": int(model.nq), "nv": int(model.nv),
            "nu": int(model.nu), "ngeom": int(model.ngeom), "nbody": int(model.nbody)}


class Peer:
    """A built env: ``step(action)``, its action width, and what it runs with."""

    def __init__(self, env, step, action_dim: int, info: dict):
        self.env, self.step, self.action_dim, self.info = env, step, action_dim, info


def make_mjlab(args: argparse.Namespace) -> Peer:
    import mjlab  # noqa: F401  (sets its MUJOCO_GL default, configures warp)
    import mjlab.tasks  # noqa: F401  (imports every task package: the registrations)
    import torch  # noqa: F401  (what mjlab steps with)
    from mjlab.envs import ManagerBasedRlEnv
    from mjlab.tasks.registry import load_env_cfg

    task = PROJECTS["mjlab"]["task"]
    cfg = load_env_cfg(task)  # the training config (play=False), as mjlab's train builds it
    cfg.scene.num_envs = args.num_envs
    cfg.seed = args.seed
    env = ManagerBasedRlEnv(cfg=cfg, device=args.device)
    env.reset()
    sim = env.sim
    info = {"task": task, "entry": f"load_env_cfg({task!r}) and ManagerBasedRlEnv(cfg, device), as mjlab's train builds it",
            "cuda_graph": bool(getattr(sim, "use_cuda_graph", False) and getattr(sim, "step_graph", None) is not None),
            "physics": {**physics_of(sim.mj_model, cfg.decimation), "nconmax": cfg.sim.nconmax, "njmax": cfg.sim.njmax},
            "episode_length_s": cfg.episode_length_s}
    return Peer(env, env.step, int(env.action_manager.total_action_dim), info)


def _unilab_checkout(package_dir: Path) -> Path:
    """A scratch folder laid out as a UniLab checkout (``src/unilab`` -> the installed package):
    unilab 1.5.2's task configs name their scene files relative to one."""
    root = Path(tempfile.mkdtemp(prefix="unilab-1.5.2-checkout-"))
    atexit.register(shutil.rmtree, root, ignore_errors=True)  # removes the link, not what it points to
    (root / "src").mkdir()
    (root / "src" / "unilab").symlink_to(package_dir, target_is_directory=True)
    return root


def _find_mjmodel(obj, depth: int = 0):
    """The compiled MjModel a unilab 1.5.2 backend steps (its public playback model is the visual
    one, or a file name): the first MjModel among its attributes, read-only, to report its options."""
    import mujoco

    if isinstance(obj, mujoco.MjModel):
        return obj
    if depth > 2:
        return None
    for value in list(vars(obj).values()) if hasattr(obj, "__dict__") else []:
        if isinstance(value, mujoco.MjModel):
            return value
    for value in list(vars(obj).values()) if hasattr(obj, "__dict__") else []:
        if hasattr(value, "__dict__") and type(value).__module__.split(".")[0] in ("unisim", "unilab"):
            found = _find_mjmodel(value, depth + 1)
            if found is not None:
                return found
    return None


def make_unilab(args: argparse.Namespace) -> Peer:
    import torch  # noqa: F401
    from hydra import compose, initialize_config_dir

    import unilab

    spec = PROJECTS["unilab-1.5.2"]
    package = Path(unilab.__file__).parent
    os.chdir(_unilab_checkout(package))
    algo, task, sim = spec["algo"], spec["task"], args.sim
    overrides = [f"task={task}/{sim}", f"algo.num_envs={args.num_envs}", f"algo.seed={args.seed}"]
    with initialize_config_dir(config_dir=str(package / "conf" / algo), version_base="1.3"):
        cfg = compose("config", overrides=overrides)
    # The override chain of unilab.scripts.train_offpolicy.build_offpolicy_env_cfg_override, with the
    # learner device this run steps on.
    from unilab.base.env_factory import make_registry_env
    from unilab.base.process_device import (
        apply_backend_env_device_override,
        apply_collector_tensor_device_override,
        configure_backend_process_device,
    )
    from unilab.training.tensor_runtime import select_collector_tensor_device
    from unilab.visualization.interactive_playback import build_offpolicy_env_cfg_override

    sim_backend = str(cfg.training.sim_backend)
    bound = configure_backend_process_device(sim_backend, args.device)
    device = bound or args.device
    env_override = build_offpolicy_env_cfg_override(algo, cfg, root_dir=Path.cwd())
    env_override = apply_backend_env_device_override(env_override, sim_backend, learner_device=device)
    env_override = apply_collector_tensor_device_override(
        env_override, sim_backend, collector_tensor_device=select_collector_tensor_device(cfg), learner_device=device)
    env = make_registry_env(str(cfg.training.task_name), sim_backend, args.num_envs, env_override)
    env.seed(args.seed)
    env.reset()
    backend = getattr(env, "backend", None)
    model = _find_mjmodel(backend) if backend is not None else None
    diagnostics = env.get_backend_runtime_diagnostics()
    graph = (diagnostics.get("diagnostics") or {}).get("cuda_graph") or {}
    decimation = round(float(env.step_dt) / float(env.physics_dt)) if hasattr(env, "step_dt") else None
    info = {"task": task,
            "entry": f"train --algo {algo} --task {task} --sim {sim}: Hydra conf/{algo} with task={task}/{sim}, "
                     f"the training script's env override, unilab.base.env_factory.make_registry_env "
                     f"({cfg.training.task_name})",
            "sim": sim, "hydra_overrides": overrides,
            "cuda_graph": graph.get("enabled"), "cuda_graph_disable_reason": graph.get("disable_reason"),
            "runtime_diagnostics": diagnostics,
            "physics": {**(physics_of(model, decimation) if model is not None else {"decimation": decimation}),
                        "nconmax": env_override.get("mjwarp_nconmax"), "njmax": env_override.get("mjwarp_njmax")},
            "episode_length_s": float(cfg.env.max_episode_seconds)}
    return Peer(env, env.step, int(env.action_space.shape[0]), info)


BUILDERS = {"mjlab": make_mjlab, "unilab-1.5.2": make_unilab}


def _stats(values: list[float]) -> dict[str, float]:
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def measure(peer: Peer, args: argparse.Namespace) -> dict:
    import torch

    device = torch.device(args.device)
    sync = (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else (lambda: None)
    n = args.num_envs
    zeros = torch.zeros(n, peer.action_dim, device=device)
    gen = torch.Generator(device=device).manual_seed(args.seed + 1)
    pool = [torch.rand(n, peer.action_dim, generator=gen, device=device) * 2 - 1 for _ in range(POOL)]
    policies = {"env_zero": lambda k: zeros, "env_random": lambda k: pool[k % POOL]}

    def timed(policy, steps: int) -> float:
        sync()
        t0 = time.perf_counter()
        for k in range(steps):
            peer.step(policy(k))
        sync()
        return time.perf_counter() - t0

    warm = {name: timed(policy, args.warmup) for name, policy in policies.items()}  # compiles, graph capture
    rates: dict[str, list[float]] = {name: [] for name in policies}
    for _ in range(args.samples):
        for name, policy in policies.items():
            rates[name].append(n * args.steps / timed(policy, args.steps))
    return {"warmup_s": warm, "env_steps_per_s": {k: _stats(v) for k, v in rates.items()},
            "env_steps_per_s_samples": rates}


def run(args: argparse.Namespace) -> dict:
    import torch

    t0 = time.perf_counter()
    module = import_peer(args.project, args.site)
    imported_s = time.perf_counter() - t0
    peer = BUILDERS[args.project](args)
    built_s = time.perf_counter() - t0 - imported_s
    figures = measure(peer, args)
    device = torch.device(args.device)
    spec = PROJECTS[args.project]
    return {
        "benchmark": "unilab_bench.peers", "project": args.project, "version": spec["version"],
        "task": peer.info.pop("task"), "sim": args.sim, "num_envs": args.num_envs, "device": str(device),
        "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
        "ours": spec["ours"], "action_dim": peer.action_dim, **peer.info,
        "steps_per_sample": args.steps, "samples": args.samples, "warmup": args.warmup, "seed": args.seed,
        "policies": {"env_zero": "zeros", "env_random": f"uniform [-1, 1], a pool of {POOL} cycled"},
        **figures, "import_s": imported_s, "build_s": built_s, "torch_threads": torch.get_num_threads(),
        "versions": {spec["distribution"]: spec["version"], **versions()},
        "peer_module": str(Path(module.__file__).parent), "python": sys.executable,
        "driver_command": " ".join([Path(__file__).name, *args.argv]),
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    record = run(args)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=2, default=str) + "\n")
    s = record["env_steps_per_s"]
    print(f"driver: {args.project} {record['task']} ({record['device']}, {args.num_envs} envs): " + ", ".join(
        f"{k} median {v['median']:.0f} env-steps/s (min {v['min']:.0f}, max {v['max']:.0f})" for k, v in s.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
