"""``unilab-export``: a checkpoint's deterministic policy as ONNX or TorchScript, with the
metadata a deployment stack needs.

    unilab-export --checkpoint runs/g1/checkpoint.pt --format onnx      # -> runs/g1/policy.onnx + policy.json
    unilab-export --checkpoint runs/g1 --format torchscript             # every snapshot: policy-90s.pt, ..., policy.pt

Given a run directory, every checkpoint it kept (the snapshots of ``runner.snapshot_at_s`` and
``runner.snapshot_at_steps``, then ``checkpoint.pt``) is exported beside it,
``checkpoint-<S>s.pt`` as ``policy-<S>s.<ext>``, ``checkpoint-<N>steps.pt`` as ``policy-<N>steps.<ext>``
(``--out`` then names a folder); ``unilab-eval --policy`` judges such files one by one.

The graph maps raw "policy" observations to actions, normalization inside
(``unilab_rl.export``). What the exported network does not know comes from the env, built
here from the checkpoint's task and env overrides (one env, mujoco on the CPU by default;
the values read are config and model facts, the same on every backend):

- ``observation``: the policy group's layout in column order, per term (a fused term per
  component as ``term/component``) its width, the function computing it (``module:name``,
  e.g. ``joint_pos_rel``: relative to the default pose) with its params, and the scale and
  clip the env applies; the history length (frames stacked oldest first); training noise is not listed (a deployed
  policy sees none);
- ``joint_names`` in action order, ``default_joint_pos`` (the reset keyframe's),
  ``action_scale``, ``action_offset``, ``action_clip``: joint target = offset + scale *
  clip(action); ``joint_stiffness`` / ``joint_damping``: the position actuators' kp / kv;
- ``control_dt`` (= physics_dt * decimation), the command terms, ``task``, ``env_overrides``
  and ``task_fingerprint``: the sha256 of the resolved task config (callables by qualified
  name), so a deployment can check that a policy belongs to the task it is meant for;
- ``algo``, ``backend``, ``trained_env_steps``, ``trained_wall_s``: how it was trained
  (``unilab-eval --policy FILE`` judges the file by the task's evaluation from these).

``--mirror-averaged`` exports the policy made left-right symmetric, what ``unilab-eval
--mirror-averaged`` judges: the graph acts with the mean of the policy's action and the mirror of
the action it takes on the mirrored observation, the task's mirror inside it
(``unilab_rl.symmetry.MirrorAveragedPolicy``); the metadata says ``mirror_averaged``. It needs a
task that declares its mirror, and the graph runs the network twice.

After writing, the exported file is run on observations of a short deterministic rollout
of the same env and compared with the torch policy; the max abs difference is printed and
must stay within ``--tolerance``. The file and its metadata are written to temporary files
beside their targets and moved into place only after that check passed: a failed export leaves
a previous one as it was. An ``--out`` (or its metadata file) that is a checkpoint being exported,
a run directory's file (``checkpoint.pt``, ``checkpoint-*.pt``, ``run.json``, ``summary.json``,
``metrics.jsonl``) or a directory is refused before anything is written. Exit codes: 0 done,
2 bad input (missing or corrupt checkpoint, missing export packages, such an ``--out``), 4 the
exported policy disagrees with torch.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any

import torch

from unilab_rl.cli.export_metadata import deployment_metadata
from unilab_rl.cli.judged import exported_name, run_checkpoints
from unilab_rl.cli.run_dir import is_run_file_name
from unilab_rl.cli.trained_env import TASK_HELP, build_trained_env, with_task
from unilab_rl.contract import POLICY_GROUP
from unilab_rl.export import (
    EXPORT_FORMATS,
    SUFFIXES,
    ExportError,
    export_policy,
    metadata_path,
    run_exported,
    staging_path,
)
from unilab_rl.policy import acting_actor, load_policy
from unilab_rl.symmetry import MirrorAveragedPolicy, declared_mirrors, mirror_averaged

EXIT_BAD_INPUT = 2
EXIT_MISMATCH = 4


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="unilab-export", description="Export a checkpoint's deterministic policy.")
    parser.add_argument("--checkpoint", type=Path, required=True)
    parser.add_argument("--format", choices=EXPORT_FORMATS, default="onnx")
    parser.add_argument("--out", type=Path,
                        help="policy file (default: policy.onnx / policy.pt next to the checkpoint)")
    parser.add_argument("--backend", default="mujoco", help="backend of the env the metadata is read from")
    parser.add_argument("--task", default=None, help=TASK_HELP)
    parser.add_argument("--verify-steps", type=int, default=64,
                        help="env steps whose observations check the exported file against torch (0: skip)")
    parser.add_argument("--tolerance", type=float, default=1e-4, help="largest accepted abs action difference")
    parser.add_argument("--mirror-averaged", action="store_true",
                        help="export the policy averaged with its own left-right mirror (needs a task that "
                             "declares its mirror)")
    return parser


@torch.no_grad()
def rollout_observations(env: Any, act: Any, steps: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Policy observations of ``steps`` env steps acted by ``act`` (observations -> actions, the
    torch policy) and its actions for them."""
    obs = env.reset()
    observations, actions = [], []
    for _ in range(steps):
        action = act(obs)
        observations.append(obs[POLICY_GROUP].cpu())
        actions.append(action.cpu())
        obs, *_ = env.step(action)
    return torch.cat(observations), torch.cat(actions)


def export(args: argparse.Namespace, factory: Any) -> int:
    if args.verify_steps < 0:
        raise ValueError(f"--verify-steps must be >= 0, got {args.verify_steps}")
    if not (math.isfinite(args.tolerance) and args.tolerance >= 0):
        raise ValueError(f"--tolerance must be a finite number >= 0, got {args.tolerance}")
    suffix = SUFFIXES[args.format]
    if args.checkpoint.is_dir():
        if args.out is not None and args.out.suffix:
            raise ValueError(f"--out {args.out}: with a run directory, --out names a folder")
    elif args.out is not None and args.out.suffix != suffix:
        raise ValueError(f"--out {args.out}: a {args.format} policy file ends in {suffix}")
    checkpoints = run_checkpoints(args.checkpoint)  # all read, and from one run, before anything is written

    def target(checkpoint: Path) -> Path:
        if args.checkpoint.is_dir():
            return (args.out or args.checkpoint) / exported_name(checkpoint, suffix)
        return args.out or checkpoint.parent / f"policy{suffix}"

    for checkpoint, _ in checkpoints:  # every target checked before any is written
        check_target(target(checkpoint), [c for c, _ in checkpoints], args.out is None)

    first = with_task(checkpoints[0][1], args.task)
    # One run, so one env serves every checkpoint: the metadata is config and model facts, and
    # each verification rollout starts from a reset.
    env = build_trained_env(factory, first, backend=args.backend, num_envs=1, device="cpu", seed=0)
    try:
        mirrors = declared_mirrors(env, first["task"]) if args.mirror_averaged else None
        codes = [export_one(args, env, mirrors, checkpoint, with_task(document, args.task), target(checkpoint))
                 for checkpoint, document in checkpoints]
    finally:
        env.close()
    return max(codes)


def check_target(out: Path, checkpoints: list[Path], default: bool) -> None:
    """Refuse writing ``out`` or its metadata file where that would destroy what a run keeps:
    a checkpoint being exported (also through a link), an existing run file of any run
    directory, or a directory. ``default``: ``out`` is the one chosen without ``--out``."""
    origin = " (the default; pass --out elsewhere)" if default else ""
    for path, role in ((out, ""), (metadata_path(out), f"its metadata file {metadata_path(out)} ")):
        resolved = path.resolve()
        if any(resolved == c.resolve() or (path.exists() and path.samefile(c)) for c in checkpoints):
            raise ValueError(f"--out {out}{origin}: {role}is a checkpoint being exported")
        if path.is_dir():
            raise ValueError(f"--out {out}{origin}: {role}is a directory")
        if resolved.exists() and is_run_file_name(resolved.name):  # what a run directory keeps
            raise ValueError(f"--out {out}{origin}: {role}would overwrite the run file {resolved}")


def export_one(args: argparse.Namespace, env: Any, mirrors: dict[str, Any] | None, checkpoint: Path,
               document: dict[str, Any], out: Path) -> int:
    """``checkpoint``'s policy written to ``out``, averaged with its mirror where ``mirrors``."""
    agent = load_policy(document, env)
    policy = agent.deterministic_policy()

    def act(obs: dict[str, torch.Tensor]) -> torch.Tensor:
        return agent.act(obs, deterministic=True)

    if mirrors is not None:
        policy, act = MirrorAveragedPolicy(policy, mirrors), mirror_averaged(act, mirrors)
    metadata = deployment_metadata(env, document, checkpoint, acting_actor(document), mirrors is not None)
    sidecar = metadata_path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    # Written and verified beside the targets, moved into place only once verified: a failed
    # export must neither replace a previous good one nor leave a partial file.
    staged = {out: staging_path(out), sidecar: staging_path(sidecar)}
    try:
        export_policy(policy, env.observation_spec[POLICY_GROUP], staged[out], args.format,
                      metadata, staged[sidecar])
        print(f"unilab-export: {out} ({args.format}) and {sidecar}: task={metadata['task']} algo={metadata['algo']} "
              f"obs={metadata['input']['shape'][1]} actions={metadata['output']['shape'][1]} "
              f"control_dt={metadata['control_dt']} fingerprint={metadata['task_fingerprint'][:19]}...")
        code = verify(args, env, act, staged[out])
        if code == 0:
            for final, temporary in staged.items():
                temporary.replace(final)
        return code
    finally:
        for temporary in staged.values():  # still there only when not moved into place
            temporary.unlink(missing_ok=True)


def verify(args: argparse.Namespace, env: Any, act: Any, exported: Path) -> int:
    """Compare the exported file's actions with the torch policy's (``act``) on a short rollout."""
    if args.verify_steps == 0:
        return 0
    observations, torch_actions = rollout_observations(env, act, args.verify_steps)
    difference = (run_exported(exported, observations) - torch_actions).abs().max().item()
    print(f"unilab-export: exported vs torch on {observations.shape[0]} observations: max abs difference "
          f"{difference:.3g} (tolerance {args.tolerance:g})")
    if not difference <= args.tolerance:
        print("unilab-export: error: the exported policy disagrees with the torch policy", file=sys.stderr)
        return EXIT_MISMATCH
    return 0


def main(argv: list[str] | None = None, factory: Any = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if factory is None:
            from unilab import make_manager_based_rl_env

            factory = make_manager_based_rl_env
        return export(args, factory)
    except (ValueError, KeyError, ExportError) as error:  # CheckpointError is a ValueError
        print(f"unilab-export: error: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())
