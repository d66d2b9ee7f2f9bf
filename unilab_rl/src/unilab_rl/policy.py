"""A trained policy from a checkpoint: the learner it holds, rebuilt to act on an env.

A run that kept an averaged policy (``averaged_policy_tau`` > 0) acts with that average by
default (what ``unilab-play``, ``unilab-eval`` and ``unilab-export`` use); its latest actor on
request. Imports torch and the runner contract only: the CLI builds the env and hands it in.
"""

from __future__ import annotations

from typing import Any

from unilab_rl.algorithms import build_agent, lookup
from unilab_rl.checkpoint import CheckpointError
from unilab_rl.contract import EnvSpec, RunnerEnv
from unilab_rl.threads import apply_thread_policy


def acting_actor(document: dict[str, Any], latest_actor: bool = False) -> str:
    """Which of the checkpoint's actors ``load_policy`` acts with: "averaged" or "latest"."""
    return "averaged" if document["algo_config"].get("averaged_policy_tau", 0.0) > 0 and not latest_actor else "latest"


def load_policy(document: dict[str, Any], env: RunnerEnv, latest_actor: bool = False) -> Any:
    """The checkpoint's learner, built for ``env`` to act with. It acts deterministically with
    its averaged policy where the run kept one (``averaged_policy_tau``), unless ``latest_actor``."""
    spec = EnvSpec.from_env(env)
    apply_thread_policy(spec.device, None)
    trained = document["spec"]
    if dict(trained["observation_spec"]) != spec.observation_spec or trained["action_dim"] != spec.action_dim:
        raise CheckpointError(
            f"checkpoint was trained with observations {trained['observation_spec']} and action_dim "
            f"{trained['action_dim']}; this env has {spec.observation_spec} and {spec.action_dim}")
    algorithm = lookup(document["algo"])
    # Compiling the networks pays off over thousands of updates, not over a few episodes.
    # Acting with the latest actor: the learner keeps no average (acting_actor decides which).
    latest = {"averaged_policy_tau": 0.0} if acting_actor(document, latest_actor) == "latest" else {}
    config = algorithm.config_class.model_validate({**document["algo_config"], "compile": False, **latest})
    agent = build_agent(document["algo"], spec, config, spec.device)
    agent.load_state_dict(document["agent"])
    return agent
