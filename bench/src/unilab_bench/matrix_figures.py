"""The matrix's figures by their fixed names: one round's figures of a case read from its
env and collector records, their min/median/max over rounds, and the printed summary."""

from __future__ import annotations

import statistics
from typing import Any


def _get(record: dict[str, Any] | None, *keys: str) -> Any:
    value: Any = record
    for key in keys:
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    return value


def case_metrics(env: dict[str, Any] | None, collector: dict[str, Any] | None) -> dict[str, Any]:
    """One round's figures of one case, by their fixed names (None where a record lacks one)."""
    phases = _get(env, "phases_ms_per_step") or {}
    cphases = _get(collector, "phase_ms_with_learning") or {}
    return {
        "collector_steps_per_s_no_learning": _get(collector, "env_steps_per_s_no_learning", "median"),
        "collector_steps_per_s_with_learning": _get(collector, "env_steps_per_s_with_learning", "median"),
        # The learner on its own CUDA stream beside collection (overlap_learning; CUDA only).
        "collector_steps_per_s_with_learning_overlapped": _get(collector, "env_steps_per_s_with_learning_overlapped",
                                                               "median"),
        # Each collector mode over the env alone timed in the same process and rounds, stepped with
        # zero actions and replaying the policy's own actions open loop (its kind of physics workload).
        **{f"collector_of_env_alone{suffix}_{mode}": _get(collector, f"of_env_alone{suffix}", mode, "median")
           for suffix in ("", "_replaying_actions")
           for mode in ("no_learning", "with_learning", "with_learning_overlapped")},
        "env_steps_per_s_streamed": _get(env, "env_steps_per_s", "env_zero", "median"),
        "env_random_steps_per_s_streamed": _get(env, "env_steps_per_s", "env_random", "median"),
        "raw_physics_steps_per_s_streamed": _get(env, "env_steps_per_s", "raw", "median"),
        "env_to_raw_ratio_streamed": _get(env, "ratio_to_raw_median", "env_zero"),
        "paired_single_step_ratio_drift_control": _get(env, "paired_ratio_to_raw", "env_zero", "median"),
        # The runtime's own cost on the env's physics workload (with --gap-rows): env / raw physics
        # replaying the env's state writes.
        "env_to_replay_ratio_streamed": _get(env, "ratio_to_raw_median", "env_vs_raw_replaying_env_writes"),
        "update_state_ms": phases.get("update_state_ms"),
        "reset_done_ms": phases.get("reset_done_ms"),
        "reset_done_reset_call_ms": phases.get("reset_done_reset_call_ms"),
        "backend_step_ms": phases.get("backend_step_ms"),
        "env_step_total_ms": phases.get("step_total_ms"),
        "policy_ms": cphases.get("policy_ms"),
        "collector_env_step_ms": cphases.get("env_step_ms"),
        "replay_ms": cphases.get("replay_ms"),  # replay insert and the collector's bookkeeping
        "learner_ms": cphases.get("learner_ms"),
        "python_calls_per_env_step": _get(env, "python_calls_per_env_step"),
        "redundant_physics_steps_in_reset": _get(env, "backend_counters", "redundant_physics_steps_per_env_step"),
        "host_syncs_per_env_step": _get(env, "dispatch_per_env_step", "host_syncs_per_step"),
        "host_syncs_per_env_step_cuda": _get(env, "host_syncs_per_env_step"),
        "host_syncs_per_collector_step": _get(collector, "dispatch_per_collector_step", "host_syncs_per_collector_step"),
        "kernel_ops_per_collector_step": _get(collector, "dispatch_per_collector_step", "kernel_ops_per_collector_step"),
        "kernel_ops_per_env_step": _get(env, "dispatch_per_env_step", "kernel_ops_per_step"),
        # The direct-runtime baseline, where the task has a hand-fused reference loop.
        "reference_steps_per_s_streamed": _get(env, "reference", "steps_per_s", "median"),
        "env_to_reference_ratio_streamed": _get(env, "env_to_reference_ratio"),
        "reference_kernel_ops_per_step": _get(env, "reference", "dispatch_per_step", "kernel_ops_per_step"),
    }


def summarize_side(samples: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    stats: dict[str, dict[str, float]] = {}
    for key in samples[0] if samples else ():
        values = [s[key] for s in samples if isinstance(s.get(key), (int, float))]
        if values:
            stats[key] = {"min": min(values), "median": statistics.median(values), "max": max(values)}
    return stats


SUMMARY_METRICS = ("collector_steps_per_s_no_learning", "collector_steps_per_s_with_learning",
                   "collector_steps_per_s_with_learning_overlapped", "collector_of_env_alone_no_learning",
                   "collector_of_env_alone_with_learning", "collector_of_env_alone_with_learning_overlapped",
                   "collector_of_env_alone_replaying_actions_no_learning",
                   "collector_of_env_alone_replaying_actions_with_learning",
                   "collector_of_env_alone_replaying_actions_with_learning_overlapped",
                   "env_steps_per_s_streamed", "raw_physics_steps_per_s_streamed", "env_to_raw_ratio_streamed",
                   "paired_single_step_ratio_drift_control", "env_to_replay_ratio_streamed", "update_state_ms", "reset_done_ms",
                   "reset_done_reset_call_ms", "backend_step_ms", "policy_ms", "replay_ms", "learner_ms",
                   "python_calls_per_env_step", "redundant_physics_steps_in_reset", "host_syncs_per_env_step",
                   "host_syncs_per_env_step_cuda", "host_syncs_per_collector_step", "kernel_ops_per_env_step",
                   "kernel_ops_per_collector_step")


def format_summary(record: dict[str, Any]) -> str:
    lines = []
    for name, per_tree in record["cases"].items():
        for label, side in per_tree.items():
            lines.append(f"{name} [{label}]: {side['status']}" + (" (smoke)" if side.get("smoke") else ""))
            for metric in SUMMARY_METRICS:
                st = side.get("stats", {}).get(metric)
                if st:
                    lines.append(f"  {metric:40s} min {st['min']:>11.4g}  median {st['median']:>11.4g}  "
                                 f"max {st['max']:>11.4g}")
    return "\n".join(lines)
