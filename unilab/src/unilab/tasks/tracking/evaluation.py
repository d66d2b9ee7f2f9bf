"""The tracking task's evaluation: every clip played from its first frame to its end.

Each clip of the command's library gets ``envs_per_clip`` envs of the play variant (no
observation noise, pushes or reset noise). An env succeeds when it reaches its clip's end
without a termination. Errors are averaged over the steps before the env's episode ended
(the state physics reached, against the clip at the same time; an env's last step, whose
state the reset replaced, is not counted) and over the tracked bodies, against the clip's
own (absolute) poses:

- ``mpkpe_mm``: mean per-body position error;
- ``root_relative_mpkpe_mm``: the same with both sides' root (first tracked body) moved to
  the origin, which leaves out the drift of the whole body;
- ``root_error_mm``: that drift, the root's own position error (per body, MPKPE is at most the
  root-relative error plus this);
- ``joint_error_rad``: mean absolute joint-angle error;
- ``mpkpe_mm_by_quarter``: ``mpkpe_mm`` over each quarter of the clip's steps, first to last,
  which tells a drift that grows along the clip from an error that is there from the start.

A clip passes with success >= ``min_success`` and MPKPE <= ``max_mpkpe_mm``; the report
passes when every clip does. An env whose episodes time out before its longest clip ends is
refused: that time-out, a truncation like the clip's end, would count as a success.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from pydantic import BaseModel, ConfigDict, Field

from unilab.evaluation import Policy, updated_config
from unilab.tasks.tracking.mdp.commands import MotionCommand


class MotionEvaluationCfg(BaseModel):
    model_config = ConfigDict(extra="forbid")

    task: str
    command_name: str
    envs_per_clip: int = Field(default=16, ge=1)
    min_success: float = Field(default=0.95, ge=0.0, le=1.0)
    max_mpkpe_mm: float = Field(default=40.0, gt=0.0)


class MotionEvaluation:
    """``num_clips``: the size of the clip library it runs on, counted from the env config by
    ``fitted`` (the task's own library until then)."""

    def __init__(self, cfg: MotionEvaluationCfg, num_clips: int) -> None:
        if num_clips < 1:
            raise ValueError(f"num_clips: expected >= 1, got {num_clips}")
        self.cfg = cfg
        self.task = cfg.task
        self.num_clips = num_clips

    def num_envs(self) -> int:
        return self.num_clips * self.cfg.envs_per_clip

    def with_options(self, options: dict[str, Any]) -> MotionEvaluation:
        return MotionEvaluation(updated_config(self.cfg, options), self.num_clips)

    def fitted(self, env_cfg: Any) -> MotionEvaluation:
        return MotionEvaluation(self.cfg, len(env_cfg.commands[self.cfg.command_name].clips))

    @torch.no_grad()
    def run(self, env: Any, policy: Policy) -> dict[str, Any]:
        cfg = self.cfg
        term = env.command_manager.term(cfg.command_name, "motion evaluation")
        if not isinstance(term, MotionCommand):
            raise ValueError(f"command {cfg.command_name!r} is a {type(term).__name__}, not a MotionCommand")
        lib = term.library
        if lib.num_clips != self.num_clips or env.num_envs != self.num_envs():
            raise ValueError(f"env: the evaluation needs {self.num_clips} clips x {cfg.envs_per_clip} envs, "
                             f"the env has {lib.num_clips} clips and {env.num_envs} envs")
        if env.max_episode_length <= int(lib.length.max()):  # a time-out is a truncation: it would count as success
            raise ValueError(f"episode_length_s: the env's episodes ({env.max_episode_length} steps) time out before "
                             f"its longest clip ends ({int(lib.length.max())} frames); evaluate with longer episodes "
                             "(the play variant's own)")
        # A clip of F frames is scored on F - 2 steps: the step that reaches its last frame ends
        # the episode. With no scored step a clip would pass at 0 mm whatever the policy did.
        short = [name for name, frames in zip(lib.names, lib.length.tolist(), strict=True) if frames < 3]
        if short:
            raise ValueError(f"clips {short}: fewer than 3 frames, so no step of theirs would be scored; the "
                             "evaluation needs clips of 3 frames or more")
        dev, n = env.device, env.num_envs
        clips = torch.arange(self.num_clips, device=dev).repeat_interleave(cfg.envs_per_clip)
        term.assign(clips)
        try:
            obs = env.reset()
            running = torch.ones(n, dtype=torch.bool, device=dev)
            succeeded = torch.zeros(n, dtype=torch.bool, device=dev)
            sums = torch.zeros(n, 4, device=dev)
            steps = torch.zeros(n, device=dev)
            quarter_sums = torch.zeros(n, 4, device=dev)
            quarter_steps = torch.zeros(n, 4, device=dev)
            clip_steps = lib.length[clips] - 2  # the scored steps of a clip of F frames (see above)
            for _ in range(int(lib.length.max())):
                obs, _, terminated, truncated, _ = env.step(policy(obs))
                ended = terminated | truncated
                # The state physics reached against the clip at the same time: the command's
                # state frame (its target is already the next frame). Rows that ended this step
                # now show their next episode, so they stop counting here.
                counted = (running & ~ended).unsqueeze(1)
                ref_pos, ref_joints = term.state_frame("body_pos", "joint_pos")
                robot_pos = term.robot_body_pos_w
                ref_pos = ref_pos.view(robot_pos.shape)
                err = torch.linalg.vector_norm(robot_pos - ref_pos, dim=-1)
                rel = torch.linalg.vector_norm((robot_pos - robot_pos[:, :1]) - (ref_pos - ref_pos[:, :1]), dim=-1)
                joint = (env.robot.joint_pos - ref_joints).abs().mean(-1)
                sums += torch.stack((err.mean(-1), rel.mean(-1), err[:, 0], joint), dim=1) * counted
                quarter = torch.div(4 * steps.long(), clip_steps, rounding_mode="floor").clamp(max=3).unsqueeze(1)
                quarter_sums.scatter_add_(1, quarter, err.mean(-1, keepdim=True) * counted)
                quarter_steps.scatter_add_(1, quarter, counted.float())
                steps += counted[:, 0].float()
                succeeded |= running & truncated & ~terminated
                running &= ~ended
        finally:
            term.assign(None)
        # An env whose episode ended on its first step has no scored state: NaN, left out of its
        # clip's means below (its failure is in the success rate), where 0 would flatter the clip.
        means = torch.where(steps.unsqueeze(1) > 0, sums / steps.clamp(min=1).unsqueeze(1), float("nan"))
        return self._report(lib.names, clips, succeeded, means, quarter_sums, quarter_steps)

    def _report(self, names, clips, succeeded, means, quarter_sums, quarter_steps) -> dict[str, Any]:
        cfg = self.cfg
        rows = []
        # Successes counted per clip, the rate divided in Python: a float32 mean made 19 of 20
        # 0.94999999, under min_success 0.95, and failed a clip at the documented ">= 95%".
        # Errors are the mean over the clip's envs that have a scored state (NaN if none has,
        # which fails the clip).
        per_clip = torch.stack([torch.cat((succeeded[clips == c].sum().unsqueeze(0), means[clips == c].nanmean(0)))
                                for c in range(self.num_clips)]).tolist()
        # Pooled over the clip's envs; None for a quarter no env reached.
        pooled = [(quarter_sums[clips == c].sum(0), quarter_steps[clips == c].sum(0)) for c in range(self.num_clips)]
        by_quarter = [[1e3 * total / count if count else None for total, count in zip(t.tolist(), k.tolist())]
                      for t, k in pooled]
        for name, (hits, mpkpe, rel, root, joint), quarters in zip(names, per_clip, by_quarter):
            success = hits / cfg.envs_per_clip  # every clip has envs_per_clip envs
            case = {"clip": name, "envs": cfg.envs_per_clip, "success_rate": success, "mpkpe_mm": 1e3 * mpkpe,
                    "root_relative_mpkpe_mm": 1e3 * rel, "root_error_mm": 1e3 * root, "joint_error_rad": joint,
                    "mpkpe_mm_by_quarter": quarters}
            case["passed"] = success >= cfg.min_success and case["mpkpe_mm"] <= cfg.max_mpkpe_mm
            rows.append(case)
        overall = {k: sum(r[k] for r in rows) / len(rows) for k in
                   ("success_rate", "mpkpe_mm", "root_relative_mpkpe_mm", "root_error_mm", "joint_error_rad")}
        return {"evaluation": "motion_tracking", "task": cfg.task, "overall": overall,
                "criteria": {"min_success": cfg.min_success, "max_mpkpe_mm": cfg.max_mpkpe_mm},
                "passed": all(r["passed"] for r in rows), "cases": rows}

    def summary_line(self, case: dict[str, Any]) -> str:
        return (f"{case['clip'][:36]:36s} success {case['success_rate']:6.1%} MPKPE {case['mpkpe_mm']:6.1f} mm "
                f"root-rel {case['root_relative_mpkpe_mm']:6.1f} mm root {case['root_error_mm']:6.1f} mm "
                f"joints {case['joint_error_rad']:.3f} rad "
                f"by quarter {'/'.join('-' if q is None else f'{q:.0f}' for q in case['mpkpe_mm_by_quarter'])} mm "
                f"{'pass' if case['passed'] else 'FAIL'}")

    def plot(self, reports: dict[str, dict[str, Any]], path: Path) -> None:
        """Success rate and MPKPE per clip, one bar group per label."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        labels = list(reports)
        clips = [c["clip"] for c in reports[labels[0]]["cases"]]
        fig, axes = plt.subplots(1, 2, figsize=(max(8, 0.6 * len(clips) + 4), 4.2))
        width = 0.8 / len(labels)
        for i, label in enumerate(labels):
            xs = [k + i * width for k in range(len(clips))]
            axes[0].bar(xs, [c["success_rate"] for c in reports[label]["cases"]], width, label=label)
            axes[1].bar(xs, [c["mpkpe_mm"] for c in reports[label]["cases"]], width, label=label)
        for ax, title in zip(axes, ("success rate", "MPKPE (mm)")):
            ax.set_xticks([k + 0.4 - width / 2 for k in range(len(clips))], clips, rotation=70, fontsize=7)
            ax.set_title(title)
            ax.grid(alpha=0.3, axis="y")
        axes[0].legend(fontsize=8)
        fig.suptitle(f"{self.cfg.task}: motion tracking")
        fig.tight_layout()
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=110)
        plt.close(fig)
