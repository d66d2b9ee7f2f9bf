"""unilab-eval's verdict and what it judges (cli/evaluate.py and cli/judged.py): exit codes, the
over-time counts, each backend's env, and which exported policies it runs (the code change each
test fails on is noted beside it).

The exit code and over-time tests stand in for the policies and their runs (``judged_checkpoints``
and ``_judge`` replaced by ones returning reports made by the velocity sweep's own ``_report``),
so each verdict is known before the command runs; the exported-policy tests write small
TorchScript exports with the metadata ``unilab-export`` writes."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from unilab_rl.checkpoint import CheckpointError
from unilab_rl.cli import evaluate as eval_cli
from unilab_rl.cli.judged import Judged, judged_export, judged_exports

pytest.importorskip("unilab")
TASK = "g1_walk_flat"


def _sweep_report(passes: list[bool]) -> dict:
    """A velocity sweep's report with one case per entry, passing or 1 m/s off its command."""
    from unilab.tasks.velocity.evaluation import VelocitySweep, VelocitySweepCfg

    commands = [(0.5, 0.0, 0.0)] * len(passes)
    sweep = VelocitySweep(VelocitySweepCfg(task="g1_walk_flat_play", command_name="twist", commands=commands,
                                           training_range=((-1.0, 1.0), (-0.5, 0.5), (-1.0, 1.0)),
                                           envs_per_command=1))
    wanted = torch.tensor(commands)
    achieved = wanted + torch.tensor([[0.0 if ok else 1.0, 0.0, 0.0] for ok in passes])
    n = len(passes)
    return sweep._report(wanted, torch.zeros(n, dtype=torch.bool), achieved, torch.zeros(n), torch.zeros(n), 10.0)


def _subject(name: str, env_steps: int) -> Judged:
    return Judged("checkpoint", Path("run") / name, TASK, "fastsac", "mujoco", {}, env_steps, float(env_steps),
                  lambda env: None, "latest")


def _evaluate(monkeypatch, tmp_path, verdicts: dict[str, dict[str, list[bool]]]) -> int:
    """unilab-eval on a run whose checkpoints (in training order) and backends judge as
    ``verdicts`` says: {checkpoint: {backend: [case passed, ...]}}."""
    subjects = [_subject(name, 100 * (i + 1)) for i, name in enumerate(verdicts)]
    backends = list(next(iter(verdicts.values())))
    monkeypatch.setattr(eval_cli, "judged_checkpoints", lambda path, latest_actor: subjects)
    monkeypatch.setattr(eval_cli, "_judge", lambda subject, evaluation, backends, overrides, args: {
        b: {**_sweep_report(verdicts[subject.path.name][b]), "simulator": {"physics_steps": 1, "altered_worlds": 0}}
        for b in backends})
    return eval_cli.main(["--checkpoint", str(tmp_path / "run"), "--backends", ",".join(backends),
                          "--out", str(tmp_path / "eval"), "--no-plot"])


# ---- the exit code: every backend of the last checkpoint passed --------------------------------
# (mutants: ``all`` backends -> ``any``; the first checkpoint's verdict instead of the last's)

def test_the_exit_code_is_0_only_when_every_backend_passed(monkeypatch, tmp_path):
    """docs/training.md: "Exit codes: 0 all backends passed, 1 some case failed"."""
    assert _evaluate(monkeypatch, tmp_path / "a", {"checkpoint.pt": {"mujoco": [True, True],
                                                                     "mjwarp": [True, True]}}) == 0
    assert _evaluate(monkeypatch, tmp_path / "b", {"checkpoint.pt": {"mujoco": [True, True],
                                                                     "mjwarp": [True, False]}}) == 1


def test_a_run_directory_exits_by_its_last_checkpoints_verdict(monkeypatch, tmp_path):
    """The module docstring: "0 every backend's evaluation passed (of a run directory: the last
    checkpoint's)": an early snapshot that failed does not fail a run that learned, nor does one
    that passed pass a run that then broke."""
    learned = {"checkpoint-60s.pt": {"mujoco": [False]}, "checkpoint.pt": {"mujoco": [True]}}
    broke = {"checkpoint-60s.pt": {"mujoco": [True]}, "checkpoint.pt": {"mujoco": [False]}}
    assert _evaluate(monkeypatch, tmp_path / "learned", learned) == 0
    assert _evaluate(monkeypatch, tmp_path / "broke", broke) == 1


# ---- over-time.json: cases passed per checkpoint and backend ----------------------------------
# (mutant: ``cases_passed`` counting the failed cases)

def test_over_time_counts_the_cases_each_checkpoint_passed_on_each_backend(monkeypatch, tmp_path, capsys):
    verdicts = {"checkpoint-60s.pt": {"mujoco": [False, False, True], "mjwarp": [False, False, False]},
                "checkpoint.pt": {"mujoco": [True, True, False], "mjwarp": [True, True, True]}}
    assert _evaluate(monkeypatch, tmp_path, verdicts) == 1  # mujoco failed a case on the last checkpoint
    rows = json.loads((tmp_path / "eval" / "over-time.json").read_text())["checkpoints"]
    cells = [(r["checkpoint"], r["trained_env_steps"], r["mujoco"], r["mjwarp"]) for r in rows]
    straight = {"overall": {"ang_vel_offset": 0.0}}  # the sweep's figure over its commands: no turning
    assert cells == [
        ("checkpoint-60s.pt", 100, {"passed": False, "cases_passed": 1, "cases": 3, **straight},
         {"passed": False, "cases_passed": 0, "cases": 3, **straight}),
        ("checkpoint.pt", 200, {"passed": False, "cases_passed": 2, "cases": 3, **straight},
         {"passed": True, "cases_passed": 3, "cases": 3, **straight})]
    printed = capsys.readouterr().out
    assert "mujoco: 2/3 passed ang_vel_offset 0  mjwarp: 3/3 passed ang_vel_offset 0" in printed
    report = json.loads((tmp_path / "eval" / "checkpoint" / "report.json").read_text())
    assert [c["passed"] for c in report["reports"]["mjwarp"]["cases"]] == [True, True, True]


# ---- _judge: each backend on an env of its own, built as the run and the command line ask -----
# (mutants: the env overrides left out of the build; the seed not the one given)

def test_each_backend_is_judged_on_its_own_env_with_the_overrides_seed_and_device_given(monkeypatch):
    import unilab

    built = []

    class _Env:
        def __init__(self, task, **kw):
            self.task, self.kw, self.closed = task, kw, False
            built.append(self)

        def simulator_diagnostics(self):
            assert not self.closed, "read after close()"
            return {"physics_steps": 1, "altered_worlds": 0, "built": len(built)}

        def close(self):
            self.closed = True

    monkeypatch.setattr(unilab, "make_manager_based_rl_env", _Env)
    evaluation = SimpleNamespace(task="g1_walk_flat_play", num_envs=lambda: 6,
                                 run=lambda env, policy: {"env": env, "policy": policy})
    subject = Judged("checkpoint", Path("checkpoint.pt"), TASK, "fastsac", "mujoco", {}, 1, 1.0,
                     lambda env: ("acting on", env), "latest")
    overrides = {"rewards.velocity.weights.alive": "2.0"}
    reports = eval_cli._judge(subject, evaluation, ["mujoco", "mjwarp"], overrides,
                              argparse.Namespace(device="cpu", seed=7, mirror_averaged=False))
    assert [(e.task, e.kw) for e in built] == [
        ("g1_walk_flat_play", {"backend": b, "num_envs": 6, "device": "cpu", "seed": 7,
                               "overrides": {"validate_actions": False, **overrides}}) for b in ("mujoco", "mjwarp")]
    for i, (env, backend) in enumerate(zip(built, ("mujoco", "mjwarp"))):
        assert env.closed  # each report carries its own env's simulator facts, read before the close
        assert reports[backend] == {"env": env, "policy": ("acting on", env),
                                    "simulator": {"physics_steps": 1, "altered_worlds": 0, "built": i + 1}}


# ---- an exported policy: what it acts on must be what it was exported for ---------------------
# (mutants: the history-length check dropped; the action-width check dropped; an export without
# an actor named "averaged"; run identity without the env overrides)

def _export(path: Path, overrides: dict | None = None, **changes) -> Path:
    """A TorchScript export (3 observations -> 2 actions, one 3-wide policy term, no history) with
    metadata as ``unilab-export`` writes it, ``changes`` applied (a value of None removes a key)."""
    from unilab_rl.cli.export_metadata import METADATA_FORMAT, task_fingerprint
    from unilab_rl.export import export_policy

    overrides = {} if overrides is None else overrides
    metadata = {"format": METADATA_FORMAT, "task": TASK, "env_overrides": overrides,
                "task_fingerprint": task_fingerprint(TASK, overrides), "algo": "fastsac", "backend": "mujoco",
                "observation": {"terms": [{"name": "state", "width": 3}], "history_length": 1},
                "input": {"shape": [1, 3]}, "output": {"shape": [1, 2]}, "trained_env_steps": 100,
                "trained_wall_s": 1.0, "actor": "averaged", **changes}
    metadata = {k: v for k, v in metadata.items() if v is not None}
    export_policy(torch.nn.Linear(3, 2), 3, path, "torchscript", metadata)
    return path


def _env(history_length: int = 1, action_dim: int = 2) -> SimpleNamespace:
    """What ``acting`` reads of an env: its policy observation layout, history and action width."""
    return SimpleNamespace(observation_manager=SimpleNamespace(describe=lambda: {"policy": {"state": 3}}),
                           cfg=SimpleNamespace(observations={"policy": SimpleNamespace(history_length=history_length)}),
                           action_dim=action_dim)


def test_an_exported_policy_acts_only_on_an_env_of_its_history_and_action_width(tmp_path):
    judged = judged_export(_export(tmp_path / "policy.pt"))
    act = judged.acting(_env())
    assert act({"policy": torch.zeros(4, 3)}).shape == (4, 2)
    with pytest.raises(ValueError, match=r"\(history 2\) are not the exported layout .* \(history 1\)"):
        judged.acting(_env(history_length=2))
    with pytest.raises(ValueError, match="2 actions, this env takes 3"):
        judged.acting(_env(action_dim=3))


def test_an_export_that_names_no_actor_holds_the_latest_actor(tmp_path):
    """Exports written before averaged policies existed name no actor: they held the latest."""
    assert judged_export(_export(tmp_path / "old.pt", actor=None)).actor == "latest"
    assert judged_export(_export(tmp_path / "new.pt")).actor == "averaged"


def test_a_policy_folder_whose_exports_differ_in_env_overrides_is_refused_as_two_runs(tmp_path):
    _export(tmp_path / "policy-1s.pt", {"rewards.velocity.weights.alive": "2.0"})
    _export(tmp_path / "policy.pt")
    with pytest.raises(CheckpointError, match="policy.pt is from another run than policy-1s.pt"):
        judged_exports(tmp_path)
