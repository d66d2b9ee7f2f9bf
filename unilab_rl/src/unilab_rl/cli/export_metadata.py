"""What an exported policy's metadata holds: written beside the network by ``unilab-export``
(and by ``unilab-ppo``'s export), read back by ``unilab-eval --policy`` (``judged``), which
checks a file against it. The fields are listed in ``unilab_rl.cli.export``'s docstring.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from unilab_rl.cli.run_record import installed_version
from unilab_rl.cli.trained_env import recorded_env_overrides
from unilab_rl.contract import POLICY_GROUP

METADATA_FORMAT = "unilab_rl.policy"
METADATA_FORMAT_VERSION = 1


def task_fingerprint(task: str, overrides: dict[str, Any]) -> str:
    """sha256 of the resolved config of ``task`` with ``overrides`` (unilab.fingerprint)."""
    from unilab.fingerprint import task_fingerprint as fingerprint

    return fingerprint(task, dict(overrides))


def stable_config(value: Any) -> Any:
    from unilab.fingerprint import stable_config as stable

    return stable(value)


def observation_layout(env: Any) -> dict[str, Any]:
    group = env.cfg.observations[POLICY_GROUP]
    terms = []
    for name, width in env.observation_manager.describe()[POLICY_GROUP].items():
        term = group.terms[name.split("/", 1)[0]]  # a fused term's component is "term/component"
        terms.append({"name": name, "width": width, "func": stable_config(term.func),
                      "params": stable_config(term.params), "scale": term.scale,
                      "clip": None if term.clip is None else list(term.clip)})
    frame_dim = sum(t["width"] for t in terms)
    return {"group": POLICY_GROUP, "terms": terms, "frame_dim": frame_dim, "history_length": group.history_length,
            "dim": frame_dim * group.history_length, "history_order": "oldest frame first"}


def deployment_metadata(env: Any, document: dict[str, Any], checkpoint: Path, actor: str,
                        mirror_averaged: bool = False) -> dict[str, Any]:
    """Everything a deployment stack needs besides the network, read from the built env;
    ``actor`` names the actor the network is ("averaged" or "latest", ``acting_actor``), and
    ``mirror_averaged`` whether the graph averages it with its own mirror."""
    actions = env.action_manager
    cols = list(actions.cols)
    actuators = [env.robot.actuators[c] for c in cols]
    overrides = recorded_env_overrides(document)
    return {
        "format": METADATA_FORMAT, "format_version": METADATA_FORMAT_VERSION,
        "task": document["task"], "env_overrides": overrides,
        "task_fingerprint": task_fingerprint(document["task"], overrides),
        "algo": document["algo"], "backend": document["backend"],
        "trained_env_steps": int(document["counters"]["env_steps"]),
        "trained_wall_s": float(document["counters"]["wall_s"]),
        "checkpoint": checkpoint.name, "actor": actor, "mirror_averaged": mirror_averaged,
        # None: run from a source tree, not installed (as a run record says it).
        "versions": {"unilab_rl": installed_version("unilab-rl"), "torch": torch.__version__},
        "input": {"name": "obs", "shape": ["batch", env.observation_spec[POLICY_GROUP]], "dtype": "float32",
                  "normalization": "inside the graph: feed raw observations"},
        "output": {"name": "actions", "shape": ["batch", actions.action_dim], "dtype": "float32"},
        "observation": observation_layout(env),
        "joint_names": list(actions.joint_names),
        "default_joint_pos": env.default_joint_pos[cols].tolist(),
        "action_scale": actions.scale.tolist(),
        "action_offset": actions.offset.tolist(),
        "action_clip": None if actions.cfg.clip is None else list(actions.cfg.clip),
        "action_to_joint_target": "joint_pos_target = action_offset + action_scale * clip(action, action_clip)",
        "joint_stiffness": [a.kp for a in actuators],
        "joint_damping": [a.kv for a in actuators],
        "control_dt": float(env.step_dt), "physics_dt": float(env.physics_dt), "decimation": int(env.decimation),
        "commands": {name: cfg.type for name, cfg in env.cfg.commands.items()},
    }

