"""gpu_walk --seeds: one process per seed at once, each in its own folder, read together by
the env steps each judged checkpoint holds."""

import json

import pytest
from unilab_rl.cli import gpu_walk, seeds

TINY = ["--backend", "mujoco", "--device", "cpu", "--num-envs", "4", "--steps", "32", "--no-tensorboard",
        "env.cuda_graph=false", "compile=false", "overlap_learning=false", "batch_size=16", "learning_starts=16",
        "actor_width=16", "critic_width=16"]


def test_seeds_train_side_by_side_each_in_its_folder_and_are_judged_together(tmp_path, capsys):
    pytest.importorskip("unilab")
    argv = ["--seeds", "0,3", "--out", str(tmp_path), "--eval", *TINY, "runner.snapshot_at_steps=16",
            "eval.envs_per_command=1", "eval.seconds=0.4", "eval.settle_s=0.1"]
    assert gpu_walk.main(argv) == 1  # 32-step policies do not walk: judged, and they failed
    for seed in (0, 3):  # each process trained its own seed
        assert json.loads((tmp_path / f"seed-{seed}" / "run" / "run.json").read_text())["seed"] == seed
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
    code = seeds.run_side_by_side([0, 1], tmp_path, [*TINY], progress_every_s=0.5)
    assert code == 0
    progress = [line for line in capsys.readouterr().out.splitlines() if line.startswith("gpu_walk: seed 1: ")]
    assert len(progress) >= 2  # the launch line, then at least one progress line from its log


def test_a_seed_that_cannot_start_gives_the_error_exit_code(tmp_path):
    pytest.importorskip("unilab")
    # Refused once, before any seed starts: nothing is created under OUT.
    out = tmp_path / "seeds"
    assert gpu_walk.main(["--seeds", "0,1", "--out", str(out), *TINY, "no_such_setting=1"]) == 2
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
    assert lines[1] == "gpu_walk: seed 1 (exit 1): 15.0M env steps 17/17, 30.3M env steps 16/17"
    assert lines[3] == "gpu_walk: seed 4 (exit 3): not judged" and lines[-1].startswith("gpu_walk: 2 of 3 judged")
    assert all(row["checkpoints_latest_actor"] == [] for row in table["seeds"])


def test_a_seed_judged_by_its_averaged_policy_also_shows_its_latest_actor(tmp_path):
    _judged(tmp_path / "seed-0", [("checkpoint.pt", 25_000_000, 17)])
    _judged(tmp_path / "seed-1", [("checkpoint.pt", 25_000_000, 16)])
    _judged(tmp_path / "latest", [("checkpoint.pt", 25_000_000, 12)])
    (tmp_path / "latest" / "eval").rename(tmp_path / "seed-1" / "eval-latest-actor")
    table = seeds.seed_table(tmp_path, [0, 1], [0, 1])
    assert [[c["cases_passed"] for c in row["checkpoints_latest_actor"]] for row in table["seeds"]] == [[], [12]]
    assert table["passed_at_last_checkpoint"] == 1  # by what acts: the averaged policy
    assert seeds.table_lines(table)[1:3] == ["gpu_walk: seed 1 (exit 1): 25.0M env steps 16/17",
                                             "gpu_walk: seed 1 latest actor: 25.0M env steps 12/17"]


@pytest.mark.parametrize("text", ["1", "1,1", "a,2", "-1,2", ""])
def test_bad_seeds_are_refused_naming_the_flag(text):
    with pytest.raises(ValueError, match="--seeds"):
        seeds.parse_seeds(text)


@pytest.mark.parametrize("clash", [["--seed", "3"], ["--nproc", "2"], ["--seed=3"]])
def test_seeds_refuse_a_single_seed_or_data_parallel_flag_and_run_nothing(tmp_path, clash, capsys):
    with pytest.raises(SystemExit):
        gpu_walk.main(["--seeds", "1,2", "--out", str(tmp_path / "out"), *clash])
    assert "--seeds runs one process per seed" in capsys.readouterr().err and not (tmp_path / "out").exists()
