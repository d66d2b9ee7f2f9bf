"""``unilab-play``: run K deterministic episodes of a checkpoint's policy and summarize them.

The task, env overrides and algorithm come from the checkpoint; backend, num_envs and device
may be changed. ``--mirror-averaged`` plays the policy averaged with its own left-right mirror
(``unilab_rl.symmetry.mirror_averaged``), as ``unilab-eval`` and ``unilab-export`` take it.
Exit codes: 0 done, 2 bad input.
"""

from __future__ import annotations

import argparse
import ctypes.util
import os
import sys
from pathlib import Path
from typing import Any

import torch

from unilab_rl.checkpoint import CheckpointError, load_checkpoint
from unilab_rl.cli.run_dir import check_file_target
from unilab_rl.cli.trained_env import TASK_HELP, build_trained_env, recorded_env_overrides, with_task
from unilab_rl.contract import EnvFactory, RunnerEnv
from unilab_rl.policy import acting_actor, load_policy
from unilab_rl.symmetry import declared_mirrors, mirror_averaged

EXIT_BAD_INPUT = 2
# MUJOCO_GL platform -> the shared library its OpenGL loader opens. Without it, importing
# mujoco fails deep inside PyOpenGL (an AttributeError on a None library), so it is checked first.
GL_LIBRARIES = {"egl": ("EGL", "libegl1"), "osmesa": ("OSMesa", "libosmesa6")}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="unilab-play", description="Evaluate a checkpoint deterministically.",
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter,
                                     epilog="Exit codes: 0 done, 2 bad input.")
    parser.add_argument("--checkpoint", type=Path, required=True, help="a checkpoint.pt unilab-train wrote")
    parser.add_argument("--backend", default=None, help="simulator backend (None: the one the checkpoint trained on)")
    parser.add_argument("--task", default=None, help=TASK_HELP)
    parser.add_argument("--num-envs", type=int, default=16, help="parallel envs")
    parser.add_argument("--device", default=None, help="torch device (None: the env decides)")
    parser.add_argument("--episodes", type=int, default=16, help="deterministic episodes to summarize")
    parser.add_argument("--seed", type=int, default=1, help="env seed")
    parser.add_argument("--mirror-averaged", action="store_true",
                        help="play the policy averaged with its own left-right mirror (needs a task that declares "
                             "its mirror)")
    parser.add_argument("--video", type=Path, help="write an mp4 of env 0's first episode (MuJoCo offscreen; "
                                                   "MUJOCO_GL=egl unless set)")
    return parser


class MirrorAveragedActing:
    """``agent`` acting deterministically, averaged with its own mirror: what ``run_episodes`` drives."""

    def __init__(self, agent: Any, mirrors: dict[str, Any]) -> None:
        self._act = mirror_averaged(lambda obs: agent.act(obs, deterministic=True), mirrors)

    def act(self, obs: dict[str, torch.Tensor], deterministic: bool) -> torch.Tensor:
        if not deterministic:
            raise ValueError("a mirror-averaged policy acts deterministically only")
        return self._act(obs)


@torch.no_grad()
def run_episodes(env: RunnerEnv, agent: Any, episodes: int, recorder: Any = None) -> dict[str, float]:
    """Step until ``episodes`` episodes have ended (and the recorder, if any, is finished);
    one host sync per step (done.any())."""
    device = torch.device(env.device)
    episode_return = torch.zeros(env.num_envs, device=device)
    episode_length = torch.zeros(env.num_envs, device=device)
    returns: list[float] = []
    lengths: list[float] = []
    obs = env.reset()
    if recorder is not None:
        recorder.capture()
    max_steps = env.max_episode_length * (episodes // env.num_envs + 2)
    for _ in range(max_steps):
        obs, reward, terminated, truncated, _ = env.step(agent.act(obs, deterministic=True))
        episode_return += reward
        episode_length += 1
        done = terminated | truncated
        if recorder is not None:
            recorder.after_step(done)
        if bool(done.any()):
            returns += episode_return[done].tolist()
            lengths += episode_length[done].tolist()
            episode_return[done] = 0.0
            episode_length[done] = 0.0
        if len(returns) >= episodes and (recorder is None or recorder.finished):
            break
    returns, lengths = returns[:episodes], lengths[:episodes]
    if not returns:
        return {"episodes": 0.0}
    return_t, length_t = torch.tensor(returns), torch.tensor(lengths)
    return {"episodes": float(len(returns)), "return_mean": return_t.mean().item(), "return_std": return_t.std(unbiased=False).item(),
            "length_mean": length_t.mean().item(), "length_fraction_of_max": length_t.mean().item() / env.max_episode_length,
            "full_length_episodes": float((length_t >= env.max_episode_length).float().mean().item())}


def play(args: argparse.Namespace, factory: EnvFactory) -> int:
    if args.episodes < 1 or args.num_envs < 1:
        raise ValueError("--episodes and --num-envs must be >= 1")
    document = with_task(load_checkpoint(args.checkpoint), args.task)
    if args.video is not None and args.video.suffix != ".mp4":
        raise ValueError(f"--video {args.video}: expected a .mp4 path")
    if args.video is not None:  # before the episode is played, not after
        check_file_target(args.video, "--video")
    backend = args.backend or document["backend"]
    env = build_trained_env(factory, document, backend=backend, num_envs=args.num_envs, device=args.device,
                            seed=args.seed)
    recorder = None
    try:
        try:
            agent = load_policy(document, env)
        except RuntimeError as error:  # load_state_dict: the state does not fit the networks its config builds
            raise CheckpointError(f"checkpoint {args.checkpoint}: its learner state does not fit its own config "
                                  f"({str(error).splitlines()[0]})") from None
        if args.mirror_averaged:
            agent = MirrorAveragedActing(agent, declared_mirrors(env, document["task"]))
        if args.video is not None:
            from unilab_rl.cli.video import (
                FirstEpisodeRecorder,  # leaf: mujoco + imageio
            )

            recorder = FirstEpisodeRecorder(env, document["task"], recorded_env_overrides(document), args.video)
        env.flush_metrics()  # start the env's averages at this evaluation
        summary = run_episodes(env, agent, args.episodes, recorder)
        env_metrics = env.flush_metrics()
    finally:
        if recorder is not None:
            recorder.close()
        env.close()
    if recorder is not None:
        print(f"unilab-play: video {args.video} ({recorder.frames} frames of env 0's first episode)")
    print(f"unilab-play: task={document['task']} backend={backend} algo={document['algo']} "
          f"actor={acting_actor(document)}{' mirror-averaged' if args.mirror_averaged else ''} trained_env_steps={document['counters']['env_steps']}")
    for key, value in {**summary, **{f"env/{k}": v for k, v in env_metrics.items()}}.items():
        print(f"  {key:40s} {value:.4f}")
    return 0


def check_gl_platform() -> None:
    """Refuse (exit 2, with the fix) a ``MUJOCO_GL`` whose library is not installed."""
    platform = os.environ.get("MUJOCO_GL", "egl").strip().lower()
    if platform not in GL_LIBRARIES:
        return  # glfw and others: MuJoCo reports its own errors
    library, package = GL_LIBRARIES[platform]
    if ctypes.util.find_library(library) is None:
        raise ValueError(f"--video: MUJOCO_GL={platform} needs the {library} library, which is not installed "
                         f"(Debian/Ubuntu: apt-get install {package}); install it or choose another "
                         f"MUJOCO_GL ({', '.join(p for p in GL_LIBRARIES if p != platform)})")


def main(argv: list[str] | None = None, factory: EnvFactory | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.video is not None:
            # MuJoCo picks its GL platform at its first import, which building the env may do.
            os.environ.setdefault("MUJOCO_GL", "egl")
            check_gl_platform()
        if factory is None:
            from unilab import make_manager_based_rl_env

            factory = make_manager_based_rl_env
        return play(args, factory)
    except (ValueError, KeyError) as error:  # CheckpointError and the factory's errors are ValueErrors
        print(f"unilab-play: error: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())
