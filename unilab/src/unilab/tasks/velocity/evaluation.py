"""The velocity task's evaluation: a sweep of fixed commands, each from a standing start.

Every command of the sweep gets ``envs_per_command`` envs of the play variant. Commands are
held fixed for the whole run (no resampling, no standing or heading envs); each env starts
from the owner's reset (keyframe, random yaw, small joint offsets) and runs ``seconds`` of
deterministic policy. Per command it reports:

- ``fall_rate``: the fraction of its envs that terminated (fell) before the end;
- ``achieved``: the body-frame (vx, vy, yaw rate) averaged over the measurement window
  (after ``settle_s``, the acceleration from standing) and over the envs still up;
- ``lin_vel_error``: per env, the norm of (its mean planar velocity - the command), averaged
  over the envs still up (``lin_vel_error_worst``: the worst env); ``ang_vel_error`` the same
  for the yaw rate; ``lin_vel_error_instant``: the per-step planar error averaged over time,
  which also counts the gait's sway;
- ``tilt_rate_rms``: per env, the RMS of the base (pelvis) frame's roll and pitch rates over the window,
  averaged over the envs still up: a diagnostic, not a criterion (the yaw-tracking reward's
  kernel counts these rates as error, so a gait that rocks the body earns less for turning);
- ``passed``: ``lin_vel_error <= max_lin_vel_error``, ``ang_vel_error <= max_ang_vel_error``
  and ``fall_rate < max_fall_rate``.

The report passes when every command passes. Its ``overall`` figure, a diagnostic, is
``ang_vel_offset``: the achieved minus the commanded yaw rate (+ is left), averaged over the
commands with an env still up (absent when every env fell). A policy that turns one way whatever
it is asked shows a large one, where its per-command misses look like unrelated yaw errors.

Every command must lie inside the training range (the ranges the command ends its curriculum
with), checked when the sweep is built. An env whose episodes time out within the sweep is
refused: a timed-out row is reset and its restarted state would be measured as a row still up
(only a termination counts as a fall).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import torch
from pydantic import BaseModel, ConfigDict, Field, model_validator

from unilab.evaluation import Policy, updated_config
from unilab.tasks.velocity.mdp.commands import UniformVelocityCommand

Twist = tuple[float, float, float]


class VelocitySweepCfg(BaseModel):
    model_config = ConfigDict(extra="forbid")

    task: str  # the play variant the sweep runs on
    command_name: str
    commands: list[Twist] = Field(min_length=1)
    training_range: tuple[tuple[float, float], tuple[float, float], tuple[float, float]]
    envs_per_command: int = Field(default=32, ge=1)
    seconds: float = Field(default=10.0, gt=0.0)
    settle_s: float = Field(default=2.0, ge=0.0)
    max_lin_vel_error: float = Field(default=0.25, gt=0.0)
    max_ang_vel_error: float = Field(default=0.25, gt=0.0)
    max_fall_rate: float = Field(default=0.02, gt=0.0, le=1.0)

    @model_validator(mode="after")
    def _inside_the_training_range(self) -> VelocitySweepCfg:
        if self.settle_s >= self.seconds:
            raise ValueError(f"settle_s ({self.settle_s}) must be shorter than seconds ({self.seconds})")
        for twist in self.commands:
            for axis, value, (lo, hi) in zip(("vx", "vy", "wz"), twist, self.training_range):
                if not lo <= value <= hi:
                    raise ValueError(f"command {twist}: {axis}={value} is outside the training range [{lo}, {hi}]")
        return self


class VelocitySweep:
    def __init__(self, cfg: VelocitySweepCfg) -> None:
        self.cfg = cfg
        self.task = cfg.task

    def num_envs(self) -> int:
        return len(self.cfg.commands) * self.cfg.envs_per_command

    def with_options(self, options: dict[str, Any]) -> VelocitySweep:
        """E.g. ``{"envs_per_command": 4, "seconds": 3}``."""
        return VelocitySweep(updated_config(self.cfg, options))

    def fitted(self, env_cfg: Any) -> VelocitySweep:
        return self  # the commands are the sweep's own, whatever the env's command ranges

    @torch.no_grad()
    def run(self, env: Any, policy: Policy) -> dict[str, Any]:
        cfg = self.cfg
        c, e = len(cfg.commands), cfg.envs_per_command
        if env.num_envs != c * e:
            raise ValueError(f"env: the sweep needs {c * e} envs ({c} commands x {e}), got {env.num_envs}")
        term = env.command_manager.term(cfg.command_name, "velocity sweep")
        if not isinstance(term, UniformVelocityCommand):
            raise ValueError(f"command {cfg.command_name!r} is a {type(term).__name__}; "
                             "the velocity sweep holds a UniformVelocityCommand")
        dev = env.device
        steps = math.ceil(cfg.seconds / env.step_dt - 1e-9)
        settle = math.ceil(cfg.settle_s / env.step_dt - 1e-9)
        _check_episode_length(env, steps, cfg.seconds)
        commands = torch.tensor(cfg.commands, dtype=torch.float32, device=dev).repeat_interleave(e, dim=0)
        term.hold(commands)
        try:
            obs = env.reset()
            n = env.num_envs
            fell = torch.zeros(n, dtype=torch.bool, device=dev)
            timed_out = torch.zeros(n, dtype=torch.bool, device=dev)
            twist_sum = torch.zeros(n, 3, device=dev)
            instant_err_sum = torch.zeros(n, device=dev)
            tilt_sq_sum = torch.zeros(n, device=dev)
            for k in range(steps):
                obs, _, terminated, truncated, _ = env.step(policy(obs))
                timed_out |= truncated & ~terminated & ~fell  # read once, after the loop (no sync per step)
                fell |= terminated
                if k >= settle:  # the state physics reached, for rows still up (a fallen row was reset)
                    robot = env.robot
                    up = (~fell).unsqueeze(1)
                    twist = torch.cat((robot.root_lin_vel_b[:, :2], robot.root_ang_vel_b[:, 2:]), dim=1)
                    twist_sum += twist * up
                    instant_err_sum += torch.linalg.vector_norm(twist[:, :2] - commands[:, :2], dim=1) * up[:, 0]
                    tilt_sq_sum += robot.root_ang_vel_b[:, :2].square().sum(dim=1) * up[:, 0]
        finally:
            term.hold(None)
        if bool(timed_out.any()):  # another time-out term of the env: a restarted row would be measured as up
            raise ValueError(f"env: {int(timed_out.sum())} envs timed out (truncated) within the sweep's "
                             f"{cfg.seconds} s; the sweep needs an env whose episodes outlast it")
        window = steps - settle
        mean_twist = twist_sum / window  # rows that fell are excluded below
        return self._report(commands, fell, mean_twist, instant_err_sum / window, (tilt_sq_sum / window).sqrt(),
                            steps * env.step_dt)

    def _report(self, commands, fell, mean_twist, instant_err, tilt_rate, seconds) -> dict[str, Any]:
        cfg = self.cfg
        c, e = len(cfg.commands), cfg.envs_per_command
        up = (~fell).view(c, e)
        lin_err = torch.linalg.vector_norm(mean_twist[:, :2] - commands[:, :2], dim=1).view(c, e)
        ang_err = (mean_twist[:, 2] - commands[:, 2]).abs().view(c, e)
        twist = mean_twist.view(c, e, 3)
        instant = instant_err.view(c, e)
        tilt = tilt_rate.view(c, e)
        cases = []
        rows = torch.stack((up.sum(1).float(), *(
            (x * up).sum(1) for x in (lin_err, ang_err, instant, twist[..., 0], twist[..., 1], twist[..., 2], tilt))),
            dim=1).tolist()  # one host read for the whole report
        worst = torch.where(up, lin_err, float("-inf")).amax(dim=1).tolist()
        for i, (command, row) in enumerate(zip(cfg.commands, rows)):
            n_up = row[0]
            mean = (lambda v, n_up=n_up: v / n_up if n_up > 0 else None)
            case = {
                "command": list(command),
                "envs": e,
                # (e - n_up) / e, not 1 - n_up / e: that rounds 1 fall of 10 to 0.09999999999999998,
                # which passed ``fall_rate < max_fall_rate`` at max_fall_rate=0.1 (10% is not < 10%).
                "fall_rate": (e - n_up) / e,
                "achieved": None if n_up == 0 else [mean(row[4]), mean(row[5]), mean(row[6])],
                "lin_vel_error": mean(row[1]),
                "lin_vel_error_worst": worst[i] if n_up > 0 else None,
                "ang_vel_error": mean(row[2]),
                "lin_vel_error_instant": mean(row[3]),
                "tilt_rate_rms": mean(row[7]),
            }
            case["passed"] = (n_up > 0 and case["lin_vel_error"] <= cfg.max_lin_vel_error
                              and case["ang_vel_error"] <= cfg.max_ang_vel_error
                              and case["fall_rate"] < cfg.max_fall_rate)
            cases.append(case)
        offsets = [case["achieved"][2] - case["command"][2] for case in cases if case["achieved"] is not None]
        return {
            "evaluation": "velocity_sweep",
            "task": cfg.task,
            "seconds": seconds,
            "settle_s": cfg.settle_s,
            "criteria": {"max_lin_vel_error": cfg.max_lin_vel_error, "max_ang_vel_error": cfg.max_ang_vel_error,
                         "max_fall_rate": cfg.max_fall_rate},
            "passed": all(case["passed"] for case in cases),
            "overall": {"ang_vel_offset": sum(offsets) / len(offsets)} if offsets else {},
            "cases": cases,
        }

    def summary_line(self, case: dict[str, Any]) -> str:
        fmt = lambda v: "  n/a " if v is None else f"{v:6.3f}"
        cmd = "(" + ", ".join(f"{v:+.2f}" for v in case["command"]) + ")"
        achieved = "(all fell)" if case["achieved"] is None else "(" + ", ".join(f"{v:+.2f}" for v in case["achieved"]) + ")"
        return (f"{cmd:22s} achieved {achieved:22s} lin err {fmt(case['lin_vel_error'])} "
                f"yaw err {fmt(case['ang_vel_error'])} falls {case['fall_rate']:5.1%} "
                f"{'pass' if case['passed'] else 'FAIL'}")

    def plot(self, reports: dict[str, dict[str, Any]], path: Path) -> None:
        """Achieved vs commanded vx, vy and yaw rate, one marker per command and label."""
        rows = {"": {label: report["cases"] for label, report in reports.items()}}
        _plot_rows(self.cfg, rows, reports, "velocity sweep", path)


def _plot_rows(cfg: VelocitySweepCfg, rows: dict[str, dict[str, list[dict[str, Any]]]],
               reports: dict[str, dict[str, Any]], title: str, path: Path) -> None:
    """One row of (vx, vy, yaw rate) axes per entry of ``rows`` (its name titles the row), each
    scattering achieved against commanded for the cases of each label."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(rows), 3, figsize=(13, 4.2 * len(rows)), squeeze=False)
    (lo_x, hi_x), (lo_y, hi_y), (lo_w, hi_w) = cfg.training_range
    for row, (row_name, cases_by_label) in zip(axes, rows.items(), strict=True):
        for axis, (name, lo, hi) in enumerate((("vx (m/s)", lo_x, hi_x), ("vy (m/s)", lo_y, hi_y),
                                               ("yaw rate (rad/s)", lo_w, hi_w))):
            ax = row[axis]
            ax.plot([lo, hi], [lo, hi], color="0.7", linewidth=1, label="commanded")
            for label, cases in cases_by_label.items():
                xs = [c["command"][axis] for c in cases if c["achieved"] is not None]
                ys = [c["achieved"][axis] for c in cases if c["achieved"] is not None]
                ax.scatter(xs, ys, s=22, label=label, alpha=0.8)
            ax.set_xlabel(f"commanded {name}")
            ax.set_ylabel(f"achieved {name}")
            ax.grid(alpha=0.3)
        if row_name:
            row[0].set_title(row_name, loc="left", fontsize=10)
        row[0].legend(fontsize=8)
    verdicts = ", ".join(f"{k}: {'pass' if r['passed'] else 'FAIL'}" for k, r in reports.items())
    fig.suptitle(f"{cfg.task}: {title} ({verdicts})")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _check_episode_length(env: Any, steps: int, seconds: float) -> None:
    """Refuse, before the sweep runs, an env whose episodes time out within it: a timed-out row is
    reset and its restarted state measured as a row still up (only a termination counts as a fall)."""
    if env.max_episode_length <= steps:
        raise ValueError(f"episode_length_s: the env's episodes ({env.max_episode_length} steps of "
                         f"{env.step_dt} s) time out within the sweep's {seconds} s ({steps} steps); "
                         "evaluate with longer episodes (the play variant's own)")


class TerrainVelocitySweepCfg(VelocitySweepCfg):
    """The velocity sweep run once per terrain type and difficulty: every env of the sweep stands
    on the sub-terrain of that type (its first column) whose row is nearest that difficulty."""

    terrains: list[str] = Field(min_length=1)
    difficulties: list[float] = Field(min_length=1)


class TerrainVelocitySweep(VelocitySweep):
    """``VelocitySweep`` on a terrain (an env with ``env.terrain``): the same commands and envs,
    run for each (terrain type, difficulty). The report's ``terrains`` holds, per type and per
    difficulty, that run's report (its ``difficulty`` the row's own); its ``cases`` are every run's
    cases, each naming its ``terrain`` and ``difficulty``; ``overall`` gives, per type, the fraction
    of its cases that passed. The report passes when every case passes."""

    def with_options(self, options: dict[str, Any]) -> TerrainVelocitySweep:
        return TerrainVelocitySweep(updated_config(self.cfg, options))

    @torch.no_grad()
    def run(self, env: Any, policy: Policy) -> dict[str, Any]:
        placement = getattr(env, "terrain", None)
        if placement is None:
            raise ValueError(f"env: the terrain sweep needs an env on a terrain; {self.cfg.task!r} has none")
        columns = {name: placement.columns_of(name)[0] for name in self.cfg.terrains}  # refuses unknown types
        per_terrain: dict[str, dict[str, Any]] = {}
        cases: list[dict[str, Any]] = []
        for name, column in columns.items():
            per_terrain[name] = {}
            for wanted in self.cfg.difficulties:
                level = placement.level_of(wanted)
                placement.pin(level, column)
                report = super().run(env, policy)
                difficulty = float(placement.terrain.difficulty[level])
                report["difficulty"] = difficulty
                per_terrain[name][f"{wanted:g}"] = report
                cases += [{**case, "terrain": name, "difficulty": difficulty} for case in report["cases"]]
        passed = {name: [c["passed"] for c in cases if c["terrain"] == name] for name in columns}
        return {
            "evaluation": "terrain_velocity_sweep",
            "task": self.cfg.task,
            "criteria": {"max_lin_vel_error": self.cfg.max_lin_vel_error,
                         "max_ang_vel_error": self.cfg.max_ang_vel_error, "max_fall_rate": self.cfg.max_fall_rate},
            "passed": all(c["passed"] for c in cases),
            "overall": {f"{name}_passed": sum(p) / len(p) for name, p in passed.items()},
            "terrains": per_terrain,
            "cases": cases,
        }

    def summary_line(self, case: dict[str, Any]) -> str:
        return f"{case['terrain']:>12s} @{case['difficulty']:.2f} " + super().summary_line(case)

    def plot(self, reports: dict[str, dict[str, Any]], path: Path) -> None:
        """The velocity sweep's axes, one row per terrain type and difficulty."""
        rows: dict[str, dict[str, list[dict[str, Any]]]] = {}
        for label, report in reports.items():
            for case in report["cases"]:
                row = rows.setdefault(f"{case['terrain']} at difficulty {case['difficulty']:.2f}", {})
                row.setdefault(label, []).append(case)
        _plot_rows(self.cfg, rows, reports, "velocity sweep per terrain", path)
