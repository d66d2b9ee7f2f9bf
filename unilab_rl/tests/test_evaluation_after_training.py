"""unilab-train --eval: the finished run judged by the task's evaluation as unilab-eval
--checkpoint OUT judges it, into OUT/eval; its options checked before training starts."""

import json

import pytest
from unilab_rl.cli import train as train_cli
from unilab_rl.cli import train_eval

TINY = ["--backend", "mujoco", "--device", "cpu", "--num-envs", "4", "--steps", "32", "--no-tensorboard",
        "env.cuda_graph=false", "compile=false", "overlap_learning=false", "batch_size=16", "learning_starts=16",
        "actor_width=16", "critic_width=16"]
QUICK_EVAL = ["eval.envs_per_command=1", "eval.seconds=0.4", "eval.settle_s=0.1"]


def test_eval_trains_then_judges_the_run_with_the_evaluation_options_given(tmp_path, capsys):
    pytest.importorskip("unilab")
    assert train_cli.main(["--out", str(tmp_path), "--eval", *TINY, *QUICK_EVAL]) == 1  # a 32-step policy does not walk
    assert (tmp_path / "checkpoint.pt").is_file() and (tmp_path / "summary.json").is_file()
    # The simulator's own facts close the summary: here MuJoCo's host bridge, 4 physics steps per env step.
    summary = json.loads((tmp_path / "summary.json").read_text())
    vectorized_steps = summary["env_steps"] // 4  # 4 envs
    assert summary["simulator"]["physics_steps"] == 4 * vectorized_steps  # 4 physics steps per env step
    report = json.loads((tmp_path / "eval" / "report.json").read_text())
    assert report["evaluation_options"]["seconds"] == "0.4" and len(report["reports"]["mujoco"]["cases"]) == 17
    assert "unilab-train: unilab-eval --checkpoint" in capsys.readouterr().out
    assert report["actor"] == "latest" and not (tmp_path / "eval-latest-actor").exists()
    assert json.loads((tmp_path / "eval" / "over-time.json").read_text())["checkpoints"][-1]["checkpoint"] == \
        "checkpoint.pt"
    # The evaluation's options are not the training run's overrides.
    assert not any(k.startswith("eval") for k in json.loads((tmp_path / "run.json").read_text())["env_overrides"])


def test_a_run_that_kept_an_averaged_policy_is_judged_by_it_and_by_its_latest_actor(tmp_path, capsys):
    pytest.importorskip("unilab")
    argv = ["--out", str(tmp_path), "--eval", *TINY, "averaged_policy_tau=0.5", *QUICK_EVAL]
    assert train_cli.main(argv) == 1
    averaged = json.loads((tmp_path / "eval" / "report.json").read_text())
    latest = json.loads((tmp_path / "eval-latest-actor" / "report.json").read_text())
    assert (averaged["actor"], latest["actor"]) == ("averaged", "latest")
    assert latest["evaluation_options"] == averaged["evaluation_options"]
    assert "--latest-actor" in capsys.readouterr().out


def test_evaluation_options_without_eval_are_refused_before_anything_runs(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        train_cli.main(["--out", str(tmp_path / "run"), "eval.seconds=3"])
    assert exit_info.value.code == 2 and not (tmp_path / "run").exists()
    assert "eval.seconds=3: evaluation options need --eval" in capsys.readouterr().err


def test_an_evaluation_option_the_protocol_lacks_is_refused_before_training(tmp_path, capsys):
    pytest.importorskip("unilab")
    out = tmp_path / "run"
    assert train_cli.main(["--out", str(out), "--eval", *TINY, "eval.no_such_option=1"]) == train_cli.EXIT_BAD_INPUT
    assert not out.exists()  # nothing trained, nothing written
    error = capsys.readouterr().err
    assert "--eval" in error and "no_such_option" in error


def test_data_parallel_ranks_train_without_eval_and_the_launcher_judges_the_run(tmp_path, monkeypatch):
    pytest.importorskip("unilab")
    launched, judged = [], []
    monkeypatch.setattr(train_cli, "launch_torchrun", lambda nproc, argv: launched.append((nproc, argv)) or 0)
    monkeypatch.setattr(train_eval, "judge_run", lambda out, options: judged.append((out, options)) or 1)
    argv = ["--nproc", "2", "--out", str(tmp_path / "run"), "--eval", *TINY, "eval.seconds=3"]
    assert train_cli.main(argv) == 1  # the evaluation's exit code
    [(nproc, rank_argv)] = launched
    assert nproc == 2 and "--eval" not in rank_argv and "--nproc" not in rank_argv
    assert not any(token.startswith("eval.") for token in rank_argv) and "compile=false" in rank_argv
    assert judged == [(tmp_path / "run", ["eval.seconds=3"])]


def test_eval_inside_a_torchrun_rank_is_refused(tmp_path, monkeypatch, capsys):
    pytest.importorskip("unilab")
    monkeypatch.setenv("WORLD_SIZE", "2")  # what torchrun sets for each rank
    monkeypatch.setenv("RANK", "1")
    assert train_cli.main(["--out", str(tmp_path / "run"), "--eval"]) == train_cli.EXIT_BAD_INPUT
    assert "--eval is for the launching command" in capsys.readouterr().err


def test_a_failed_training_run_is_not_judged_and_gives_its_exit_code(tmp_path, monkeypatch):
    pytest.importorskip("unilab")
    monkeypatch.setattr(train_cli, "train", lambda *args, **kwargs: train_cli.EXIT_INTERRUPTED)
    monkeypatch.setattr(train_eval, "judge_run", lambda out, options: pytest.fail("judged a failed run"))
    assert train_cli.main(["--out", str(tmp_path / "run"), "--eval"]) == train_cli.EXIT_INTERRUPTED
