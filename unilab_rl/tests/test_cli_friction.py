"""What unilab-train, unilab-eval and the runner say to a user: a GPU preset without CUDA,
--show-config, a bare key that is a flag, the closing line, the progress bar, eval's help and
its over-time record."""

from __future__ import annotations

import json
import statistics

import pytest
from fake_env import PointMassEnv
from helpers import TINY
from unilab_rl.cli import evaluate as eval_cli
from unilab_rl.cli import train as train_cli

TOKENS = [f"{k}={v}" for k, v in TINY["flashsac"].items()] + ["log_every=4", "checkpoint_every=1000"]


def fake_factory(task, *, backend, num_envs, device, seed, overrides):
    return PointMassEnv(num_envs=num_envs, seed=seed, max_episode_length=20)


def refusing_factory(*args, **kwargs):
    raise AssertionError("no env is built")


def test_a_gpu_preset_without_cuda_is_refused_before_anything_is_built(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    code = train_cli.main(["--preset", "gpu_walk", "--out", str(tmp_path / "run")], factory=refusing_factory,
                          tasks=["g1_walk_flat"])
    assert code == 2
    err = capsys.readouterr().err
    assert "preset gpu_walk needs a CUDA GPU (mjwarp, 4096 envs)" in err and "on a CPU use" in err
    assert "--backend mujoco" in err and not (tmp_path / "run").exists()


def test_show_config_prints_every_resolved_field_and_builds_nothing(tmp_path, capsys):
    code = train_cli.main(["--show-config", "--task", "fake_task", "--backend", "fake", "--out", str(tmp_path / "r"),
                           "batch_size=64", "log_every=7", "env.max_episode_length=9"],
                          factory=refusing_factory, tasks=["fake_task"])
    assert code == 0
    out = capsys.readouterr().out
    assert "task: fake_task" in out and "backend: fake" in out and "algo: flashsac" in out
    assert "  batch_size = 64" in out and "  gamma = " in out  # algo fields, given and default
    assert "  log_every = 7" in out and "  checkpoint_every = " in out  # runner fields
    assert "  max_episode_length = '9'" in out
    assert not (tmp_path / "r").exists()
    assert train_cli.main(["--show-config", "--task", "nope"], factory=refusing_factory, tasks=["fake_task"]) == 2


def test_help_names_show_config_and_the_override_namespaces(capsys):
    with pytest.raises(SystemExit):
        train_cli.main(["--help"], factory=refusing_factory, tasks=["fake_task"])
    out = capsys.readouterr().out
    assert "--show-config" in out and "algo.<field>" in out and "runner.<field>" in out and "env.<key>" in out


def test_a_bare_key_that_is_a_flag_names_the_flag(tmp_path, capsys):
    code = train_cli.main(["--task", "fake_task", "--backend", "fake", "--out", str(tmp_path / "r"), "num_envs=abc"],
                          factory=refusing_factory, tasks=["fake_task"])
    assert code == 2
    assert "num_envs is the --num-envs flag, not an override; write --num-envs abc" in capsys.readouterr().err


def test_the_closing_line_gives_each_figure_once_and_the_median_rate(tmp_path, capsys):
    argv = ["--task", "fake_task", "--backend", "fake", "--num-envs", "8", "--steps", "168", "--out",
            str(tmp_path / "r"), "--no-progress", "--no-tensorboard", *TOKENS]
    assert train_cli.main(argv, factory=fake_factory, tasks=["fake_task"]) == 0
    done = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("unilab-train: done"))
    assert done.count("updates=") == 1 and done.count("env_steps_per_s=") == 1
    assert "(median of 6 log intervals)" in done  # 21 iterations: 5 full intervals of 4 and the partial one
    # The figure is the median of the rates the run logged, not the last (partial) interval's.
    rates = [json.loads(line)["perf/env_steps_per_s"] for line in (tmp_path / "r" / "metrics.jsonl").read_text().splitlines()]
    assert len(rates) == 6
    assert f"env_steps_per_s={statistics.median(rates):.0f} " in done, (done, rates)


@pytest.mark.parametrize(("budget", "unit"), [({"max_env_steps": 40}, "step"), ({"max_seconds": 0.3}, "s")])
def test_the_progress_bar_closes_full_when_the_budget_is_spent(budget, unit, capsys):
    from helpers import tiny_agent
    from unilab_rl.runner import OffPolicyRunner, RunIdentity
    from unilab_rl.runner_config import RunnerConfig

    env, config, agent = tiny_agent("flashsac")
    runner = OffPolicyRunner(env, agent, config, RunIdentity("fake_task", "fake", "flashsac", 0), None,
                             runner_config=RunnerConfig(log_every=3, checkpoint_every=1000))
    runner.train(progress=True, **budget)
    last = capsys.readouterr().err.rstrip().split("\r")[-1]
    assert "100%" in last, last


def test_eval_help_has_exit_codes_and_flag_help(capsys):
    with pytest.raises(SystemExit):
        eval_cli.main(["--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "Exit codes: 0 passed" in out and "1 a case failed" in out and "2 bad input" in out
    assert "torch device of the env and the policy" in out and "seed of the evaluation's envs (default 1)" in out


def test_over_time_records_null_for_the_side_not_judged(tmp_path):
    pytest.importorskip("unilab")
    from test_user_tasks import QUICK
    from test_user_tasks import TINY as G1_TINY

    out = tmp_path / "run"
    assert train_cli.main(["--task", "g1_walk_flat", "--steps", "32", "--out", str(out), *G1_TINY]) == 0
    policy = tmp_path / "policy.pt"
    from unilab_rl.cli import export as export_cli

    assert export_cli.main(["--checkpoint", str(out / "checkpoint.pt"), "--format", "torchscript", "--out",
                            str(policy), "--verify-steps", "0"]) == 0
    assert eval_cli.main(["--policy", str(policy), "--no-plot", "--out", str(tmp_path / "eval"), *QUICK]) in (0, 1)
    record = json.loads((tmp_path / "eval" / "over-time.json").read_text())
    assert record["run"] is None and record["policy"] == str(policy)
