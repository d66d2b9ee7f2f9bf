"""PPO on any unilab task with rsl_rl: the env from unilab's factory, seen through
``unilab_rl.rsl_rl_vecenv.RslRlVecEnv``, trained by rsl_rl's ``OnPolicyRunner``.

    python -m unilab_rl.cli.ppo --task g1_walk_flat --backend mujoco --num-envs 64 --iterations 100 --out runs/ppo

Needs the ``ppo`` extra (``pip install 'unilab-rl[ppo]'``: rsl-rl-lib). ``key=value`` tokens
whose first dotted part names a section of the rsl_rl runner config below, or written
``runner.<key>`` (``algorithm.learning_rate=3e-4``, ``actor.hidden_dims=[64,64]``,
``num_steps_per_env=16``, ``clip_actions=1.0``), edit that config (values parsed as Python
literals; rsl_rl rejects unknown keys when it builds the algorithm); ``env.<key>`` or another
key of the task's config is an env override (``rewards.velocity.weights.alive=2``), routed as
``unilab-train`` routes them (unilab_rl.cli.overrides) and validated by the env factory.

OUT receives what rsl_rl writes (``model_<it>.pt`` every ``save_interval`` iterations and at
the end, TensorBoard events, ``git/`` diffs), ``run.json`` (task, backend, env overrides,
runner config, iterations, env steps and wall time) and, unless ``--export none``, the final
policy as ``policy.onnx`` (or ``policy.pt``) with the deployment metadata ``unilab-export``
writes (``policy.json``); with ``clip_actions`` the exported graph clamps its actions as
training does. ``--resume OUT/model_<it>.pt`` continues from a saved model; each model
carries the run's env steps and wall time so far and the env's training state (rsl_rl's
``infos``), so the counts of a resumed run include those of the model it resumed and its env
goes on from that model's step count (a curriculum keeps its stage);
``--play OUT/model_<it>.pt`` runs deterministic episodes of it and prints what
``unilab-play`` prints. An OUT that already holds a run (a PPO run's models, run.json or
policy, or a unilab-train run) is refused, as unilab-train refuses it, unless the command resumes
that directory's newest model or passes ``--overwrite`` (which removes the old run's files).
--resume and --play read the model as data (``torch.load(weights_only=True)``, not rsl_rl's own
``runner.load``): a file whose pickle names anything else (code) is refused.

Exit codes: 0 done, 2 bad input (nothing trained).
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import copy
import io
import json
import math
import os
import pickle
import random
import sys
import time
from pathlib import Path
from typing import Any

import torch
from torch import nn

from unilab_rl.cli.overrides import Namespace, OverrideError, env_namespace, route
from unilab_rl.cli.trained_env import build_trained_env
from unilab_rl.contract import CRITIC_GROUP, POLICY_GROUP, EnvFactory
from unilab_rl.threads import apply_thread_policy

EXIT_BAD_INPUT = 2
ALGO_NAME = "rsl_rl_ppo"
PPO_HINT = "install the ppo extra: pip install 'unilab-rl[ppo]' (rsl-rl-lib)"
COUNTERS = "unilab_rl_counters"  # the key of a saved model's infos holding {"env_steps", "wall_s"}
ENV_STATE = "unilab_rl_env_state"  # ... and the env's training state (its step count, what its terms learned)
RSL_RL_MODEL_KEYS = ("actor_state_dict", "critic_state_dict", "optimizer_state_dict", "iter")
PPO_RUN_FILES = ("run.json", "policy.onnx", "policy.pt", "policy.json", "git")  # beside the models

# rsl_rl 5.x runner config. Networks and PPO settings are those of the rsl_rl locomotion
# examples (mjlab's and Isaac Lab's velocity tasks); the actor reads the "policy" group,
# the critic the privileged "critic" group (asymmetric actor-critic).
DEFAULT_RUNNER_CFG: dict[str, Any] = {
    "num_steps_per_env": 24,
    "save_interval": 50,
    "obs_groups": {"actor": [POLICY_GROUP], "critic": [CRITIC_GROUP]},
    "clip_actions": None,
    "logger": "tensorboard",
    "algorithm": {"class_name": "PPO", "num_learning_epochs": 5, "num_mini_batches": 4, "learning_rate": 1e-3,
                  "schedule": "adaptive", "desired_kl": 0.01, "gamma": 0.99, "lam": 0.95, "entropy_coef": 0.01,
                  "clip_param": 0.2, "value_loss_coef": 1.0, "use_clipped_value_loss": True,
                  "max_grad_norm": 1.0},
    "actor": {"class_name": "MLPModel", "hidden_dims": [512, 256, 128], "activation": "elu",
              "obs_normalization": True,
              "distribution_cfg": {"class_name": "GaussianDistribution", "init_std": 1.0, "std_type": "scalar"}},
    "critic": {"class_name": "MLPModel", "hidden_dims": [512, 256, 128], "activation": "elu",
               "obs_normalization": True},
}


class UsageError(ValueError):
    pass


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m unilab_rl.cli.ppo", description="Train a unilab task with rsl_rl's PPO.",
        epilog="Overrides: key=value; runner.<key> or a key under one of " + ", ".join(sorted(DEFAULT_RUNNER_CFG))
               + " edits the rsl_rl runner config, env.<key> or another key of the task's config is an env "
               "override; a bare key both name is refused, as is one neither has.")
    parser.add_argument("--task", default="g1_walk_flat",
                        help="registered task or package.module:task_name (the module is imported)")
    parser.add_argument("--backend", default=None, help="default: mujoco; with --play, the run's backend")
    parser.add_argument("--num-envs", type=int, default=None, help="default: 64; with --play, 16")
    parser.add_argument("--device", default=None, help="torch device; default: the env decides")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--iterations", type=int, default=100, help="PPO iterations (rollout + update) to run")
    parser.add_argument("--out", type=Path, default=Path("runs/ppo"))
    parser.add_argument("--resume", type=Path, help="an rsl_rl model_<it>.pt to continue from")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace the run --out already holds (its models, run.json, policy, events)")
    parser.add_argument("--export", choices=("onnx", "torchscript", "none"), default="onnx",
                        help="export the final policy with deployment metadata (default onnx)")
    parser.add_argument("--play", type=Path, metavar="MODEL",
                        help="instead of training: run --episodes deterministic episodes of OUT/model_<it>.pt "
                             "(task, overrides and runner config from the run.json beside it)")
    parser.add_argument("--episodes", type=int, default=16, help="episodes for --play")
    parser.add_argument("--symmetry", action="store_true",
                        help="rsl_rl's symmetry augmentation from the task's left-right mirror (env.mirrors)")
    parser.add_argument("overrides", nargs="*", metavar="key=value")
    return parser


def literal(text: str) -> Any:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text  # a bare word such as tanh or adaptive


def _dotted_keys(tree: dict[str, Any], path: str = "") -> set[str]:
    keys = {f"{path}{name}" for name in tree}
    for name, child in tree.items():
        if isinstance(child, dict):
            keys |= _dotted_keys(child, f"{path}{name}.")
    return keys


# The rsl_rl runner config's keys; a section also takes keys it lacks (rsl_rl refuses unknown ones).
RUNNER_NAMESPACE = Namespace("runner", "rsl_rl runner", frozenset(_dotted_keys(DEFAULT_RUNNER_CFG)),
                             takes=lambda key: key.split(".")[0] in DEFAULT_RUNNER_CFG)


def split_ppo_overrides(tokens: list[str], env: Namespace | None = None) -> tuple[dict[str, Any], dict[str, str]]:
    """(runner config with the tokens applied, env overrides); ``env``: the env's settings
    (``env_namespace(task)``), None where the factory checks them."""
    runner_cfg = copy.deepcopy(DEFAULT_RUNNER_CFG)
    routed = route(tokens, [RUNNER_NAMESPACE, env or Namespace("env", "env", None)])
    for key, value in routed["runner"].items():
        path = key.split(".")
        node = runner_cfg
        for part in path[:-1]:
            if not isinstance(node.get(part), dict):
                raise OverrideError(f"override {key!r}: {part!r} is not a section of the rsl_rl runner config")
            node = node[part]
        node[path[-1]] = literal(value)
    return runner_cfg, routed["env"]


def check_runner_numbers(runner_cfg: dict[str, Any], num_envs: int) -> None:
    """Refuse counts and clip values rsl_rl would only trip over mid-run (a ZeroDivisionError or
    TypeError after --out has its TensorBoard events and git/ diffs), naming the override."""
    counts = {"num_steps_per_env": runner_cfg["num_steps_per_env"], "save_interval": runner_cfg["save_interval"],
              "algorithm.num_learning_epochs": runner_cfg["algorithm"]["num_learning_epochs"],
              "algorithm.num_mini_batches": runner_cfg["algorithm"]["num_mini_batches"]}
    for key, value in counts.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise UsageError(f"{key}: expected an int >= 1, got {value!r}")
    batch = num_envs * counts["num_steps_per_env"]
    if counts["algorithm.num_mini_batches"] > batch:  # an empty mini-batch would train nothing
        raise UsageError(f"algorithm.num_mini_batches: expected at most the rollout's {batch} samples "
                         f"(--num-envs x num_steps_per_env), got {counts['algorithm.num_mini_batches']}")
    clip = runner_cfg["clip_actions"]
    if clip is not None and (isinstance(clip, bool) or not isinstance(clip, int | float) or not 0 < clip < math.inf):
        raise UsageError(f"clip_actions: expected a finite number > 0 or None, got {clip!r}")


def load_model_file(path: Path, flag: str, map_location: str = "cpu") -> Any:
    """An rsl_rl model file read as data (``weights_only``: tensors, containers and plain values),
    never as rsl_rl's own ``runner.load`` reads it (``weights_only=False``, which runs whatever
    code a crafted file's pickle names). A file that needs more is refused, naming it."""
    try:
        return torch.load(path, weights_only=True, map_location=map_location)
    except pickle.UnpicklingError as error:  # weights_only met a type it does not allow: a global, a callable
        # torch's message is mostly advice to load with weights_only=False; keep the line naming what was met
        lines = [line for line in str(error).splitlines() if "GLOBAL" in line or "Unsupported" in line]
        first = lines[0].strip().rstrip(".") if lines else type(error).__name__
        raise UsageError(f"{flag} {path}: refused: it holds objects other than tensors and plain values, and "
                         f"loading them could run code ({first}); give a model a PPO run saved") from None
    except Exception as error:  # an empty, truncated or foreign file: EOFError, RuntimeError, ...
        raise UsageError(f"{flag} {path}: not a readable torch file ({type(error).__name__}: {error})") from None


def load_into_runner(runner: Any, loaded: dict[str, Any]) -> None:
    """What rsl_rl's ``OnPolicyRunner.load`` does with a file's contents, given them read as data."""
    if runner.alg.load(loaded, None, True):
        runner.current_learning_iteration = loaded["iter"]


def read_resume_model(path: Path) -> dict[str, Any]:
    """The rsl_rl model to resume, read before anything is built so a wrong file is refused at once."""
    if not path.is_file():
        raise UsageError(f"--resume {path}: no such file")
    loaded = load_model_file(path, "--resume")
    missing = [key for key in RSL_RL_MODEL_KEYS if not isinstance(loaded, dict) or key not in loaded]
    if missing:
        raise UsageError(f"--resume {path}: expected an rsl_rl model (OUT/model_<it>.pt of a PPO run); "
                         f"it lacks {', '.join(missing)}")
    return loaded


def model_number(path: Path) -> int:
    digits = path.stem.removeprefix("model_")
    return int(digits) if digits.isdigit() else -1


def held_run_files(out: Path) -> list[str]:
    """What a run left in ``out``: this CLI's (models, run.json, the exported policy) and unilab-train's."""
    from unilab_rl.cli.run_dir import run_files

    if not out.is_dir():
        return []
    models = sorted(out.glob("model_*.pt"), key=model_number)
    ppo = [p.name for p in models] + [name for name in PPO_RUN_FILES if (out / name).exists()]
    return list(dict.fromkeys(ppo + run_files(out)))


def check_ppo_out(out: Path, resume: Path | None, overwrite: bool) -> None:
    """Refuse an ``--out`` that holds a run this command would replace (as unilab-train does), unless
    it resumes that directory's newest model or passes ``--overwrite``; reads only."""
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} is a file, not a directory")
    held = held_run_files(out)
    if not held or overwrite:
        return
    models = sorted(out.glob("model_*.pt"), key=model_number)
    if resume is not None and models and resume.resolve() == models[-1].resolve():
        return  # continuing this directory's own run from its newest model: its later models come after it
    hint = f"continue it with --resume {models[-1]}, " if models else ""
    listed = ", ".join(held[:6]) + (f" and {len(held) - 6} more" if len(held) > 6 else "")
    raise UsageError(f"--out {out} already holds a run ({listed}); {hint}choose another --out, "
                     "or pass --overwrite to replace it")


def remove_old_run(out: Path) -> None:
    """``--overwrite``: the old run's files, so none of its models is mistaken for the new run's."""
    import shutil

    for name in held_run_files(out):
        target = out / name
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        else:
            target.unlink()
    for events in out.glob("events.out.tfevents.*"):
        events.unlink()


def resumed_infos(path: Path, loaded: dict[str, Any]) -> dict[str, Any]:
    """What this CLI saved with the model to resume: the run's env steps and wall time so far, and
    the env's training state. A model saved without them (by an older unilab-ppo) is not resumed:
    its env would start again from step 0 (a curriculum from its first stage)."""
    infos = loaded.get("infos")
    if not isinstance(infos, dict) or ENV_STATE not in infos or not isinstance(infos.get(COUNTERS), dict):
        raise UsageError(f"--resume {path}: the model holds no env training state (saved by an older unilab-ppo); "
                         "resumed, its env would restart its curriculum. It can still be played (--play)")
    counters = infos[COUNTERS]
    return {"counters": {"env_steps": int(counters["env_steps"]), "wall_s": float(counters["wall_s"])},
            "env": infos[ENV_STATE]}


def counting_runner(base: type) -> type:
    """``base`` (rsl_rl's OnPolicyRunner, imported lazily: the ppo extra is optional) whose models carry the
    run's cumulative env steps and wall time and the env's training state in rsl_rl's ``infos``;
    ``earlier`` holds a resumed model's counts."""

    class CountingRunner(base):
        earlier = {"env_steps": 0, "wall_s": 0.0}
        started = 0.0

        def learn(self, *args: Any, **kwargs: Any) -> None:
            self.started = time.perf_counter()
            super().learn(*args, **kwargs)

        def counters(self) -> dict[str, float]:
            return {"env_steps": self.earlier["env_steps"] + self.logger.tot_timesteps,
                    "wall_s": self.earlier["wall_s"] + time.perf_counter() - self.started}

        def save(self, path: str, infos: dict | None = None) -> None:  # learn() saves with infos=None
            super().save(path, {**(infos or {}), COUNTERS: self.counters(), ENV_STATE: self.env.env.training_state()})

    return CountingRunner


def default_factory() -> EnvFactory:
    from unilab import make_manager_based_rl_env

    return make_manager_based_rl_env


def train_ppo(args: argparse.Namespace, factory: EnvFactory) -> int:
    try:
        from rsl_rl.runners import OnPolicyRunner

        from unilab_rl.rsl_rl_vecenv import RslRlVecEnv, mirror_augmentation
    except ImportError as error:
        raise UsageError(f"PPO needs rsl_rl ({error}); {PPO_HINT}") from None
    args.backend = args.backend or "mujoco"
    args.num_envs = 64 if args.num_envs is None else args.num_envs
    if args.iterations < 1 or args.num_envs < 1:
        raise UsageError("--iterations and --num-envs must be >= 1")
    try:
        namespace = env_namespace(args.task)  # imports a package.module:task_name's module
    except ValueError as error:  # its module is missing, fails to import or lacks the task
        raise UsageError(str(error)) from None
    runner_cfg, env_overrides = split_ppo_overrides(args.overrides, namespace)
    check_runner_numbers(runner_cfg, args.num_envs)
    resumed = None if args.resume is None else read_resume_model(args.resume)
    carried = None if resumed is None else resumed_infos(args.resume, resumed)  # refused before building
    check_ppo_out(args.out, args.resume, args.overwrite)
    if args.export != "none":
        from unilab_rl.export import ExportError, check_export_packages

        try:
            check_export_packages(args.export)
        except ExportError as error:
            raise UsageError(str(error)) from None
    torch.manual_seed(args.seed)
    random.seed(args.seed)
    try:
        env = factory(args.task, backend=args.backend, num_envs=args.num_envs, device=args.device, seed=args.seed,
                      overrides=env_overrides)
    except (ValueError, KeyError) as error:  # unknown task or backend, bad env override: the factory says why
        raise UsageError(str(error)) from None
    try:
        clip_actions = runner_cfg.pop("clip_actions")
        vec_env = RslRlVecEnv(env, clip_actions=clip_actions,
                              metrics_every=int(runner_cfg["num_steps_per_env"]),
                              cfg={"task": args.task, "backend": args.backend, "env_overrides": env_overrides})
        given_cfg = copy.deepcopy(runner_cfg)
        if args.symmetry:
            if vec_env.spec.mirrors is None:
                raise UsageError(f"--symmetry: task {args.task!r} declares no left-right mirror")
            given_cfg["algorithm"]["symmetry_cfg"] = {"use_data_augmentation": True, "use_mirror_loss": False,
                                                      "mirror_loss_coeff": 0.0,
                                                      "data_augmentation_func": mirror_augmentation}
        apply_thread_policy(vec_env.device, None)
        try:
            runner = counting_runner(OnPolicyRunner)(vec_env, given_cfg, log_dir=str(args.out),
                                                     device=str(vec_env.device))
        except (TypeError, ValueError, KeyError, AttributeError) as error:  # a bad key or value in the config
            raise UsageError(f"rsl_rl rejected the runner config: {error}") from None
        if resumed is not None:
            runner.earlier = carried["counters"]
            try:
                load_into_runner(runner, load_model_file(args.resume, "--resume", str(vec_env.device)))
            except (RuntimeError, KeyError, ValueError) as error:  # networks of another shape or config
                raise UsageError(f"--resume {args.resume}: does not fit this run's runner config: {error}") from None
            try:
                env.load_training_state(carried["env"])
            except ValueError as error:
                raise UsageError(f"--resume {args.resume}: its env training state does not fit this env: {error}") from None
        if args.overwrite:  # only now, every check passed
            remove_old_run(args.out)
        args.out.mkdir(parents=True, exist_ok=True)  # only now: bad input above leaves no trace in --out
        runner.learn(args.iterations, init_at_random_ep_len=False)
        counters = runner.counters()
        model = args.out / f"model_{runner.current_learning_iteration}.pt"
        env_steps, wall_s = counters["env_steps"], counters["wall_s"]
        record = {"task": args.task, "backend": args.backend, "num_envs": args.num_envs, "seed": args.seed,
                  "algo": ALGO_NAME, "env_overrides": env_overrides, "runner_cfg": runner_cfg,
                  "clip_actions": clip_actions, "symmetry": args.symmetry,
                  "iterations": args.iterations, "env_steps": env_steps, "wall_s": wall_s, "model": model.name,
                  "resumed_from": None if args.resume is None else str(args.resume), "command": " ".join(sys.argv)}
        (args.out / "run.json").write_text(json.dumps(record, indent=1, default=str) + "\n")
        if args.export != "none":
            exported = export_ppo_policy(runner, env, record, model, args.export, args.out)
            print(f"unilab-ppo: exported {exported}")
    finally:
        env.close()
    print(f"unilab-ppo: done, {args.iterations} iterations, {env_steps} env steps in all; model {model}")
    return 0


def play_ppo(args: argparse.Namespace, factory: EnvFactory) -> int:
    """Deterministic episodes of a saved model, summarized as ``unilab-play`` does."""
    from rsl_rl.runners import OnPolicyRunner

    from unilab_rl.cli.play import run_episodes
    from unilab_rl.rsl_rl_vecenv import RslRlPolicy, RslRlVecEnv

    record_path = args.play.parent / "run.json"
    if not args.play.is_file() or not record_path.is_file():
        raise UsageError(f"--play {args.play}: expected an rsl_rl model with the run.json of its run beside it")
    if args.episodes < 1 or (args.num_envs is not None and args.num_envs < 1):
        raise UsageError("--episodes and --num-envs must be >= 1")
    loaded = load_model_file(args.play, "--play")  # refused before anything is built
    missing = [key for key in RSL_RL_MODEL_KEYS if not isinstance(loaded, dict) or key not in loaded]
    if missing:
        raise UsageError(f"--play {args.play}: expected an rsl_rl model (OUT/model_<it>.pt of a PPO run); "
                         f"it lacks {', '.join(missing)}")
    record = json.loads(record_path.read_text())
    backend = args.backend or record["backend"]
    try:
        env = build_trained_env(factory, record, backend=backend, num_envs=args.num_envs or 16, device=args.device,
                                seed=args.seed + 1)
    except (ValueError, KeyError) as error:
        raise UsageError(str(error)) from None
    try:
        vec_env = RslRlVecEnv(env)
        apply_thread_policy(vec_env.device, None)
        with contextlib.redirect_stdout(io.StringIO()):  # rsl_rl prints the networks
            runner = OnPolicyRunner(vec_env, copy.deepcopy(record["runner_cfg"]), log_dir=None,
                                    device=str(vec_env.device))
        load_into_runner(runner, load_model_file(args.play, "--play", str(vec_env.device)))
        agent = RslRlPolicy(runner.get_inference_policy(), clip_actions=record.get("clip_actions"))
        env.flush_metrics()  # start the env's averages at this evaluation
        summary = run_episodes(env, agent, args.episodes)
        env_metrics = env.flush_metrics()
    finally:
        env.close()
    print(f"unilab-ppo: play {args.play}: task={record['task']} backend={backend} "
          f"trained_env_steps={record['env_steps']}")
    for key, value in {**summary, **{f"env/{k}": v for k, v in env_metrics.items()}}.items():
        print(f"  {key:40s} {value:.4f}")
    return 0


class ClampedActions(nn.Module):
    """An actor followed by rsl_rl's ``clip_actions`` clamp: what training (``RslRlVecEnv``) and --play
    (``RslRlPolicy``) send to the env, so the exported graph computes it for any consumer."""

    def __init__(self, actor: nn.Module, clip: float) -> None:
        super().__init__()
        self.actor = actor
        self.clip = float(clip)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.actor(obs).clamp(-self.clip, self.clip)


def export_ppo_policy(runner: Any, env: Any, record: dict[str, Any], model: Path, fmt: str, out: Path) -> Path:
    """The final actor (normalizer, MLP, distribution mean, the clip_actions clamp) with unilab-export's metadata."""
    from unilab_rl.cli.export_metadata import deployment_metadata
    from unilab_rl.export import SUFFIXES, export_policy

    actor = runner.alg.get_policy().as_jit().cpu().eval()
    clip = record["clip_actions"]
    if clip is not None:
        actor = ClampedActions(actor, clip).eval()
    document = {"task": record["task"], "backend": record["backend"], "env_overrides": record["env_overrides"],
                "algo": ALGO_NAME, "counters": {"env_steps": record["env_steps"], "wall_s": record["wall_s"]}}
    metadata = deployment_metadata(env, document, model, "latest")  # PPO keeps no averaged policy
    if clip is not None:  # the network's own clamp, before the env's action_clip
        metadata["output"]["clip"] = [-float(clip), float(clip)]
    path = out / f"policy{SUFFIXES[fmt]}"
    export_policy(actor, env.observation_spec[POLICY_GROUP], path, fmt, metadata)
    return path


def main(argv: list[str] | None = None, factory: EnvFactory | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser().parse_intermixed_args(argv)
    try:
        if args.play is not None:
            return play_ppo(args, factory or default_factory())
        return train_ppo(args, factory or default_factory())
    except (UsageError, OverrideError) as error:
        print(f"unilab-ppo: error: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
