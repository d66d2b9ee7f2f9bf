"""Registry of the shipped algorithms: name -> (pydantic config class, learner class)."""

from __future__ import annotations

from typing import Any, NamedTuple

import torch

from unilab_rl.algo_config import OffPolicyConfig
from unilab_rl.contract import EnvSpec, OffPolicyAgent
from unilab_rl.fastsac import FastSAC, FastSACConfig
from unilab_rl.flashsac import FlashSAC, FlashSACConfig


class Algorithm(NamedTuple):
    config_class: type[OffPolicyConfig]
    learner_class: type


ALGORITHMS: dict[str, Algorithm] = {
    "flashsac": Algorithm(FlashSACConfig, FlashSAC),
    "fastsac": Algorithm(FastSACConfig, FastSAC),
}


class UnknownAlgorithm(ValueError):
    pass


def lookup(name: str) -> Algorithm:
    if name not in ALGORITHMS:
        raise UnknownAlgorithm(f"unknown algorithm {name!r}; valid: {', '.join(sorted(ALGORITHMS))}")
    return ALGORITHMS[name]


def update_metric_names(name: str) -> tuple[str, ...]:
    """The names an algorithm's update returns: a run logs them under ``LOSS_METRIC_PREFIX``."""
    return lookup(name).learner_class.update_metrics


def build_config(name: str, values: dict[str, Any]) -> OffPolicyConfig:
    """Validate ``values`` (strings are coerced by pydantic) into the algorithm's config."""
    return lookup(name).config_class.model_validate(values)


def build_agent(name: str, spec: EnvSpec, config: OffPolicyConfig, device: torch.device) -> OffPolicyAgent:
    agent: OffPolicyAgent = lookup(name).learner_class(spec, config, device)
    return agent
