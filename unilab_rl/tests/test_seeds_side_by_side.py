"""unilab-train --seeds: one process per seed at once, each in its own folder, read together by
the env steps each judged checkpoint holds."""

import json

import pytest
from unilab_rl.cli import seeds, train_args
from unilab_rl.cli import train as train_cli
from unilab_rl.cli.presets import PRESETS

TINY = ["--backend", "mujoco", "--device", "cpu", "--num-envs", "4", "--steps", "32", "--no-tensorboard",
        "env.cuda_graph=false", "compile=false", "overlap_learning=false", "batch_size=16", "learning_starts=16",
        "actor_width=16", "critic_width=16"]


def test_seeds_train_side_by_side_each_in_its_folder_and_are_judged_together(tmp_path, capsys):
    pytest.importorskip("unilab")
    argv = ["--seeds", "0,3", "--out", str(tmp_path), "--eval", *TINY, "runner.snapshot_at_steps=16",
            "eval.envs_per_command=1", "eval.seconds=0.4", "eval.settle_s=0.1"]
    assert train_cli.main(argv) == 1  # 32-step policies do not walk: judged, and they failed
    for seed in (0, 3):  # each process trained its own seed
        assert json.loads((tmp_path / f"seed-{seed}" / "run.json").read_text())["seed"] == seed
    table = json.loads((tmp_path / "seeds.json").read_text())
    assert [row["seed"] for row in table["seeds"]] == [0, 3] and [row["exit_code"] for row in table["seeds"]] == [1, 1]
    for row in table["seeds"]:
        assert row["env_steps"] == 32
        assert [(c["checkpoint"], c["env_steps"], c["cases"]) for c in row["checkpoints"]] == [
            ("checkpoint-16steps.pt", 16, 17), ("checkpoint.pt", 32, 17)]
    assert (table["judged"], table["passed_at_last_checkpoint"]) == (2, 0)
    assert "0 of 2 judged seeds passed at their last checkpoint" in capsys.readouterr().out


def test_while_the_seeds_run_their_latest_log_lines_are_printed(tmp_path, capsys):
    pytest.importorskip("unilab")
    _, tasks = train_cli.default_env_factory()
    code = seeds.run_side_by_side([0, 1], tmp_path, [*TINY], tasks, None, progress_every_s=0.5)
    assert code == 0
    progress = [line for line in capsys.readouterr().out.splitlines() if line.startswith("unilab-train: seed 1: ")]
    assert len(progress) >= 2  # the launch line, then at least one progress line from its log


def test_a_seed_that_cannot_start_gives_the_error_exit_code(tmp_path):
    pytest.importorskip("unilab")
    # Refused once, before any seed starts: nothing is created under OUT.
    out = tmp_path / "seeds"
    assert train_cli.main(["--seeds", "0,1", "--out", str(out), *TINY, "no_such_setting=1"]) == 2
    assert not out.exists()


def _judged(folder, rows):
    folder.mkdir(parents=True)
    (folder / "summary.json").write_text(json.dumps({"env_steps": rows[-1][1], "median_env_steps_per_s_learning": 1.0,
                                                     "first_learning_s": rows[-1][2] / 10}))
    over_time = {"checkpoints": [{"checkpoint": name, "trained_wall_s": 1.0, "trained_env_steps": steps,
                                  "mjwarp": {"passed": passed == 17, "cases_passed": passed, "cases": 17}}
                                 for name, steps, passed in rows]}
    (folder / "eval").mkdir()
    (folder / "eval" / "over-time.json").write_text(json.dumps(over_time))


def test_the_table_counts_seeds_by_their_last_judged_checkpoint(tmp_path):
    _judged(tmp_path / "seed-0", [("checkpoint-15000000steps.pt", 15_003_648, 9), ("checkpoint.pt", 34_300_000, 17)])
    _judged(tmp_path / "seed-1", [("checkpoint-15000000steps.pt", 15_003_648, 17), ("checkpoint.pt", 30_261_248, 16)])
    _judged(tmp_path / "seed-2", [("checkpoint.pt", 30_175_232, 17)])
    (tmp_path / "seed-4").mkdir()  # crashed before writing anything
    table = seeds.seed_table(tmp_path, [0, 1, 2, 4], [0, 1, 0, 3])
    assert [[c["cases_passed"] for c in row["checkpoints"]] for row in table["seeds"]] == [[9, 17], [17, 16], [17], []]
    assert (table["judged"], table["passed_at_last_checkpoint"]) == (3, 2)
    assert [row["first_learning_s"] for row in table["seeds"]] == [1.7, 1.6, 1.7, None]  # each seed's own
    lines = seeds.table_lines(table)
    assert lines[1] == "unilab-train: seed 1 (exit 1): 15.0M env steps 17/17, 30.3M env steps 16/17"
    assert lines[3] == "unilab-train: seed 4 (exit 3): not judged" and lines[-1].startswith("unilab-train: 2 of 3 judged")
    assert all(row["checkpoints_latest_actor"] == [] for row in table["seeds"])


def test_a_seed_judged_by_its_averaged_policy_also_shows_its_latest_actor(tmp_path):
    _judged(tmp_path / "seed-0", [("checkpoint.pt", 25_000_000, 17)])
    _judged(tmp_path / "seed-1", [("checkpoint.pt", 25_000_000, 16)])
    _judged(tmp_path / "latest", [("checkpoint.pt", 25_000_000, 12)])
    (tmp_path / "latest" / "eval").rename(tmp_path / "seed-1" / "eval-latest-actor")
    table = seeds.seed_table(tmp_path, [0, 1], [0, 1])
    assert [[c["cases_passed"] for c in row["checkpoints_latest_actor"]] for row in table["seeds"]] == [[], [12]]
    assert table["passed_at_last_checkpoint"] == 1  # by what acts: the averaged policy
    assert seeds.table_lines(table)[1:3] == ["unilab-train: seed 1 (exit 1): 25.0M env steps 16/17",
                                             "unilab-train: seed 1 latest actor: 25.0M env steps 12/17"]


@pytest.mark.parametrize("text", ["1", "1,1", "a,2", "-1,2", ""])
def test_bad_seeds_are_refused_naming_the_flag(text, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        train_cli.main(["--seeds", text, "--out", str(tmp_path / "out")])
    assert exit_info.value.code == 2 and not (tmp_path / "out").exists()
    assert "argument --seeds" in capsys.readouterr().err


@pytest.mark.parametrize(("clash", "message"), [
    (["--seed", "3"], "--seeds runs one process per seed: drop --seed"),
    (["--nproc", "2"], "--seeds runs one process per seed: drop --nproc"),
    (["--seed=3"], "--seeds runs one process per seed: drop --seed"),
    (["--seed", "3", "--nproc", "2"], "--seeds runs one process per seed: drop --seed and --nproc"),
    (["--resume", "runs/walk/checkpoint.pt"], "--seeds with --resume"),
    (["--curve-json", "curve.json"], "--seeds with --curve-json: every seed would write the same file"),
    (["--summary-json", "s.json"], "--seeds with --summary-json: every seed would write the same file"),
])
def test_seeds_refuse_a_flag_that_contradicts_them_and_run_nothing(tmp_path, clash, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        train_cli.main(["--seeds", "1,2", "--out", str(tmp_path / "out"), *clash])
    assert exit_info.value.code == 2 and not (tmp_path / "out").exists()
    assert message in capsys.readouterr().err


def test_a_seeds_command_is_the_users_command_with_its_own_folder_and_seed_last(tmp_path):
    argv = ["--preset", "gpu_track", "--seeds", "0,1", "--out", str(tmp_path), "--minutes", "2", "--eval",
            "compile=false", "eval.seconds=3"]
    seed_argv = seeds.seed_argv(1, tmp_path, argv)
    assert seed_argv == ["--preset", "gpu_track", "--minutes", "2", "--eval", "compile=false", "eval.seconds=3",
                         "--out", str(tmp_path / "seed-1"), "--seed", "1", "--no-progress"]
    args = train_cli.build_parser().parse_intermixed_args(seed_argv)
    assert (args.out, args.seed, args.seeds, args.summary_json) == (tmp_path / "seed-1", 1, None, None)
    # Its own --out wins over another spelling of the flag left in the command (argparse takes the last).
    assert train_cli.build_parser().parse_intermixed_args(seeds.seed_argv(0, tmp_path, ["--ou", "x"])).out == \
        tmp_path / "seed-0"


def test_each_seed_runs_the_preset_given_on_the_command_line(tmp_path, monkeypatch):
    pytest.importorskip("unilab")
    captured = {}
    monkeypatch.setattr(seeds, "run_side_by_side",
                        lambda seed_list, out, argv, tasks, backends: captured.setdefault("argv", argv) and 0)
    assert train_cli.main(["--seeds", "0,1", "--out", str(tmp_path), "--preset", "gpu_track", "--minutes", "2"]) == 0
    seed_argv = seeds.seed_argv(0, tmp_path, captured["argv"])
    args = train_cli.build_parser().parse_intermixed_args(seed_argv)
    train_args.apply_preset(args)
    assert args.preset == "gpu_track" and args.task == PRESETS["gpu_track"].task
    assert seed_argv.count("--preset") == 1  # the printed command names the preset it runs, once
