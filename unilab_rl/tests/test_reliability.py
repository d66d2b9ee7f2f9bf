"""No run is silently destroyed or corrupted, and every bad input is exit 2 naming the argument.

Each case below is one a careless or hostile user hit: a damaged checkpoint, a second run
into a finished run's directory, two runs on one directory, a resume override that did not
take effect, a budget that never ends, bad values found only while building, impossible
configurations, SIGTERM, and the smaller ones. Each asserts the fixed behaviour: the exit
code, the argument in the message, and (where a run exists) its files unchanged by sha256.
Fast: the fake env where the real one is not the point, 8 mujoco envs where it is.
"""

import hashlib
import shutil
import signal
import struct
import zipfile
from pathlib import Path

import pytest
import torch
from test_cli import TASKS, TINY_TOKENS, base_args, fake_factory, run_train
from unilab_rl.checkpoint import (
    INTEGRITY_KEY,
    CheckpointError,
    load_checkpoint,
    save_checkpoint,
    state_digests,
)
from unilab_rl.cli import play as play_cli
from unilab_rl.cli import train as train_cli
from unilab_rl.cli.run_dir import LOCK_NAME, RunDirError, RunDirLock, claim_run_dir
from unilab_rl.runner import LearnerDiverged

BAD_INPUT = train_cli.EXIT_BAD_INPUT


def tree_digests(root: Path) -> dict[str, str]:
    """sha256 of every file under ``root`` (relative path -> digest)."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def with_tensorboard(out: Path) -> list[str]:
    return [a for a in base_args(out) if a != "--no-tensorboard"]


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    """A finished run (checkpoint, metrics, summary, TensorBoard); tests copy it before changing it."""
    out = tmp_path_factory.mktemp("finished") / "run"
    torch.set_num_threads(1)
    assert run_train(with_tensorboard(out) + TINY_TOKENS) == 0
    return out


@pytest.fixture
def run_copy(finished, tmp_path) -> Path:
    out = tmp_path / "run"
    shutil.copytree(finished, out)
    return out


def refused(capsys, argv, *fragments, factory=fake_factory) -> str:
    code = train_cli.main(argv, factory=factory, tasks=TASKS)
    err = capsys.readouterr().err
    assert code == BAD_INPUT, err
    assert "Traceback" not in err
    for fragment in fragments:
        assert fragment in err, err
    return err


# ---- 1. a damaged checkpoint is refused, naming the file and the damaged part ----------------

def flip_bytes_inside_a_tensor(source: Path, damaged: Path) -> None:
    """8 bytes flipped in the middle of the stored data of the tensor nearest the file's middle."""
    data = bytearray(source.read_bytes())
    with zipfile.ZipFile(source) as archive:
        records = [r for r in archive.infolist() if "/data/" in r.filename and r.file_size >= 64]
    record = min(records, key=lambda r: abs(r.header_offset - len(data) // 2))
    name_length, extra_length = struct.unpack("<HH", data[record.header_offset + 26:record.header_offset + 30])
    start = record.header_offset + 30 + name_length + extra_length + record.file_size // 2 - 4
    data[start:start + 8] = bytes(b ^ 0xFF for b in data[start:start + 8])
    damaged.write_bytes(bytes(data))


def test_a_checkpoint_with_flipped_bytes_is_refused_by_resume_and_play(finished, tmp_path, capsys):
    damaged = tmp_path / "damaged.pt"
    flip_bytes_inside_a_tensor(finished / "checkpoint.pt", damaged)
    before = damaged.read_bytes()
    out = tmp_path / "resumed"
    err = refused(capsys, base_args(out) + ["--resume", str(damaged), *TINY_TOKENS], str(damaged), "is damaged: agent.")
    assert "digests" in err
    assert not out.exists() and damaged.read_bytes() == before
    assert play_cli.main(["--checkpoint", str(damaged), "--episodes", "2"], factory=fake_factory) == BAD_INPUT
    assert "is damaged: agent." in capsys.readouterr().err


def test_a_checkpoint_holding_nan_is_refused_even_with_matching_digests(finished, tmp_path):
    document = load_checkpoint(finished / "checkpoint.pt")
    state = document["agent"]["critic_optimizer"]["state"]
    state[next(iter(state))]["exp_avg"].view(-1)[0] = float("nan")
    document[INTEGRITY_KEY] = {"algorithm": "sha256", "digests": state_digests(document)[0]}  # a buggy writer's file
    torch.save(document, tmp_path / "nan.pt")
    with pytest.raises(CheckpointError, match=r"nan.pt is damaged: agent\.critic_optimizer\.state\.\d+\.exp_avg hold NaN"):
        load_checkpoint(tmp_path / "nan.pt")


def test_a_changed_value_outside_tensors_is_refused_naming_its_part(finished, tmp_path):
    document = load_checkpoint(finished / "checkpoint.pt")
    document["counters"]["env_steps"] += 1  # e.g. a byte flipped in the pickled counters
    torch.save(document, tmp_path / "edited.pt")
    with pytest.raises(CheckpointError, match="edited.pt is damaged: counters do not match the digests"):
        load_checkpoint(tmp_path / "edited.pt")


def test_non_finite_state_is_never_written_and_a_divergence_says_what_is_on_disk(tmp_path):
    from test_checkpoint import make_runner

    runner = make_runner("flashsac", tmp_path)
    runner.train(max_env_steps=12 * 8)
    path = tmp_path / "checkpoint.pt"
    saved_at, finite = runner.env_steps, path.read_bytes()
    with torch.no_grad():
        next(runner.agent.actor.parameters()).view(-1)[0] = float("nan")
    with pytest.raises(LearnerDiverged, match=r"non-finite state \(agent\.actor\.") as error:
        runner.save(path)  # no loss says so yet: the state check catches it
    assert f"{path} holds the finite weights of env step {saved_at}" in str(error.value)
    assert path.read_bytes() == finite
    assert load_checkpoint(path)["counters"]["env_steps"] == saved_at  # the message is true
    assert [p.name for p in tmp_path.iterdir()] == ["checkpoint.pt"]  # no temporary file left


def test_a_divergence_before_any_save_does_not_claim_a_checkpoint(tmp_path):
    from test_checkpoint import make_runner

    runner = make_runner("flashsac", tmp_path)
    with torch.no_grad():
        next(runner.agent.critic.parameters()).fill_(float("nan"))
    with pytest.raises(LearnerDiverged, match=f"no checkpoint was written to {tmp_path}"):
        runner.train(max_env_steps=10**6)
    assert not (tmp_path / "checkpoint.pt").exists()


# ---- 2. a new run never replaces a finished one ---------------------------------------------

def test_a_new_run_into_a_finished_runs_directory_is_refused_and_changes_nothing(run_copy, capsys):
    before = tree_digests(run_copy)
    assert {"checkpoint.pt", "metrics.jsonl", "summary.json"} <= set(before)
    refused(capsys, with_tensorboard(run_copy) + TINY_TOKENS, f"--out {run_copy} already holds a run",
            "checkpoint.pt, metrics.jsonl, summary.json, tensorboard", f"--resume {run_copy / 'checkpoint.pt'}",
            "--overwrite")
    assert tree_digests(run_copy) == before


def test_overwrite_replaces_the_old_run_and_resume_continues_it(run_copy, capsys):
    old_lines = (run_copy / "metrics.jsonl").read_text().count("\n")
    assert run_train(with_tensorboard(run_copy) + ["--overwrite", *TINY_TOKENS]) == 0
    assert load_checkpoint(run_copy / "checkpoint.pt")["counters"]["env_steps"] == 160  # a new run, not 320
    assert (run_copy / "metrics.jsonl").read_text().count("\n") == old_lines
    assert len(list((run_copy / "tensorboard").iterdir())) == 1
    assert run_train(base_args(run_copy) + ["--resume", str(run_copy / "checkpoint.pt"), *TINY_TOKENS]) == 0
    assert load_checkpoint(run_copy / "checkpoint.pt")["counters"]["env_steps"] == 320
    assert (run_copy / "metrics.jsonl").read_text().count("\n") > old_lines  # the resumed run appends
    capsys.readouterr()
    refused(capsys, base_args(run_copy) + ["--overwrite", "--resume", str(run_copy / "checkpoint.pt")],
            "--overwrite would delete")


def test_overwrite_also_removes_the_old_runs_snapshots_and_their_left_temporary_files(run_copy, capsys):
    # Left behind, the old run's snapshots were judged by unilab-eval as the new run's.
    (run_copy / "checkpoint-40steps.pt").write_bytes((run_copy / "checkpoint.pt").read_bytes())
    (run_copy / ".checkpoint-90s.pt.123.tmp").write_text("a killed save")
    assert run_train(base_args(run_copy) + ["--overwrite", *TINY_TOKENS]) == 0
    assert not (run_copy / "checkpoint-40steps.pt").exists() and not (run_copy / ".checkpoint-90s.pt.123.tmp").exists()


def test_resuming_a_snapshot_into_its_own_directory_is_refused_and_keeps_the_newer_checkpoint(run_copy, capsys):
    snapshot = run_copy / "checkpoint-40steps.pt"
    snapshot.write_bytes((run_copy / "checkpoint.pt").read_bytes())
    before = tree_digests(run_copy)
    refused(capsys, base_args(run_copy) + ["--resume", str(snapshot), *TINY_TOKENS],
            f"--out {run_copy} already holds a run", f"--resume {run_copy / 'checkpoint.pt'}")
    assert tree_digests(run_copy) == before


@pytest.mark.parametrize("name", ["checkpoint.pt", "checkpoint-40steps.pt", "run.json", "metrics.jsonl"])
def test_a_json_output_that_would_replace_a_runs_own_file_is_refused(run_copy, tmp_path, capsys, name):
    before = tree_digests(run_copy)
    for flag in ("--summary-json", "--curve-json"):
        refused(capsys, base_args(tmp_path / "new") + [flag, str(run_copy / name), *TINY_TOKENS],
                f"{flag} {run_copy / name} would replace a run's own file ({name})")
    refused(capsys, base_args(tmp_path / "new") + ["--summary-json", str(tmp_path / "new" / name), *TINY_TOKENS],
            "would replace a run's own file")  # this run's own directory, before it holds anything
    assert tree_digests(run_copy) == before and not (tmp_path / "new").exists()


def test_the_curve_and_the_summary_cannot_share_a_file(tmp_path, capsys):
    same = str(tmp_path / "out.json")
    refused(capsys, base_args(tmp_path / "new") + ["--curve-json", same, "--summary-json", same, *TINY_TOKENS],
            f"--curve-json and --summary-json are both {same}")


# ---- 3. one live run per directory ----------------------------------------------------------

def test_a_directory_a_live_run_holds_is_refused(run_copy, capsys):
    lock = RunDirLock(run_copy)  # a live run (flock conflicts across open files, in one process too)
    try:
        before = tree_digests(run_copy)
        refused(capsys, base_args(run_copy) + ["--resume", str(run_copy / "checkpoint.pt"), *TINY_TOKENS],
                "is in use by a live run (pid ")
        assert tree_digests(run_copy) == before
        with pytest.raises(RunDirError, match="in use by a live run"):  # a start that raced past the first check
            claim_run_dir(run_copy, run_copy / "checkpoint.pt", overwrite=False)
    finally:
        lock.release()
    assert not (run_copy / LOCK_NAME).exists()


def test_a_lock_file_left_by_a_killed_run_does_not_block(run_copy):
    (run_copy / LOCK_NAME).write_text("pid 1 on elsewhere, started long ago\n")  # nobody holds it
    assert run_train(base_args(run_copy) + ["--resume", str(run_copy / "checkpoint.pt"), *TINY_TOKENS]) == 0
    assert not (run_copy / LOCK_NAME).exists()


# ---- 4. a resume override takes effect or is refused ----------------------------------------

def test_a_resume_learning_rate_takes_effect_and_is_recorded(run_copy):
    assert run_train(base_args(run_copy) + ["--resume", str(run_copy / "checkpoint.pt"), *TINY_TOKENS,
                                            "learning_rate=1e-5"]) == 0
    document = load_checkpoint(run_copy / "checkpoint.pt")
    assert document["algo_config"]["learning_rate"] == 1e-5
    for name in ("actor_optimizer", "critic_optimizer", "temperature_optimizer"):
        assert [g["lr"] for g in document["agent"][name]["param_groups"]] == [1e-5], name


@pytest.mark.parametrize(("override", "fragments"), [
    ("actor_width=32", ("actor_width=32 (checkpoint: 16) cannot change on resume", "learning_rate")),
    ("learning_rate=inf", ("learning_rate='inf'", "finite")),
])
def test_a_resume_override_that_cannot_take_effect_is_refused(run_copy, capsys, override, fragments):
    before = tree_digests(run_copy)
    tokens = [t for t in TINY_TOKENS if not t.startswith(override.split("=")[0] + "=")]
    refused(capsys, base_args(run_copy) + ["--resume", str(run_copy / "checkpoint.pt"), *tokens, override],
            *fragments)
    assert tree_digests(run_copy) == before


# ---- 5, 6. bad values: exit 2 naming the argument, nothing created --------------------------

@pytest.mark.parametrize(("extra", "fragment"), [
    (["--minutes", "nan"], "--minutes must be a finite number > 0, got nan"),
    (["--minutes", "inf"], "--minutes must be a finite number > 0, got inf"),
    (["--seed", "1180591620717411303424"], "--seed must be an integer in [0, 2**62]"),
    (["--torch-threads", "0"], "--torch-threads must be in [1, "),
    (["--torch-threads", "50000"], "--torch-threads must be in [1, "),  # libgomp crashed creating them
    (["--curve-json", "{tmp}"], "--curve-json {tmp} is a directory"),
    (["--summary-json", "{tmp}"], "--summary-json {tmp} is a directory"),
    (["replay_capacity_per_env=1125899906842624"], "replay_capacity_per_env=1125899906842624"),
    (["--num-envs", "2305843009213693952"], "--num-envs 2305843009213693952"),
    (["learning_rate=inf"], "learning_rate='inf': Input should be a finite number"),
])
def test_bad_values_fail_before_anything_is_written(tmp_path, capsys, extra, fragment):
    out = tmp_path / "run"
    argv = base_args(out)
    extra = [e.format(tmp=tmp_path) for e in extra]
    if extra[0] in ("--minutes", "--num-envs"):  # replaces --steps / the base env count
        drop = "--steps" if extra[0] == "--minutes" else "--num-envs"
        i = argv.index(drop)
        argv = argv[:i] + argv[i + 2:]
    refused(capsys, argv + [*TINY_TOKENS, *extra], fragment.format(tmp=tmp_path))
    assert not out.exists()


REAL_ENV_CASES = [
    ([], "rewards.velocity.params.std_lin_vel=0", "rewards term 'velocity'"),
    ([], "episode_length_s=1e999", "override 'episode_length_s': bad value inf"),
    ([], "backend_options.nthreadz=1", "nthreadz"),
    ([], "observations.policy=None", "missing groups ['policy']"),
    ([], "rewards.velocity.weights.alive=nan", "rewards.velocity.weights.alive: Input should be a finite number"),
    ([], "commands.twist.lin_vel_x=[2,-1]", "'commands.twist.lin_vel_x': bad value [2, -1]"),
    ([], "actions.clip=[1,-1]", "'actions.clip': bad value [1, -1]"),
    ([], "events.reset_joints.params.position_range=[1,-1]", "params.position_range=(1, -1)"),
    ([], "events.push.interval_range_s=[-1,-1]", "'events.push.interval_range_s': bad value [-1, -1]"),
    ([], "commands.twist.resampling_time_range_s=[-5,-1]", "'commands.twist.resampling_time_range_s'"),
    (["--task", "g1_walk_flat_dr"], "events.torso_mass.params.range=[-2,-1]",
     "term 'torso_mass': randomize_body_mass: range (-2, -1) writes body_mass"),  # the backend's minimums
    # A factor of 0 would zero the torso's mass: the backend's per-body minimum refuses it.
    (["--task", "g1_walk_flat_dr"], "events.torso_mass.params.range=[0,1]",
     "term 'torso_mass': randomize_body_mass: range (0, 1) writes body_mass 1e-06 below the backend's declared "
     "minimums (per element, 0 to 1e-06) at factor 0"),
]


@pytest.mark.parametrize(("flags", "override", "fragment"), REAL_ENV_CASES, ids=[c[1] for c in REAL_ENV_CASES])
def test_bad_env_values_on_the_real_env_are_exit_2_naming_them_with_nothing_created(tmp_path, capsys, flags,
                                                                                    override, fragment):
    pytest.importorskip("unilab")
    out = tmp_path / "run"
    argv = ["--task", "g1_walk_flat", "--backend", "mujoco", "--num-envs", "8", "--steps", "16", "--out", str(out),
            "--no-progress", "--no-tensorboard", "batch_size=32", "learning_starts=64", *flags, override]
    code = train_cli.main(argv)
    err = capsys.readouterr().err
    assert code == BAD_INPUT and fragment in err and "Traceback" not in err, err
    assert not out.exists()


def test_a_run_whose_every_transition_is_quarantined_stops_naming_the_term(tmp_path, capsys):
    # A finite weight so large that the reward overflows: every row is quarantined, none is learnable.
    pytest.importorskip("unilab")
    out = tmp_path / "run"
    argv = ["--task", "g1_walk_flat", "--backend", "mujoco", "--num-envs", "8", "--steps", "640", "--out", str(out),
            "--no-progress", "--no-tensorboard", "batch_size=32", "learning_starts=64", "actor_width=16",
            "critic_width=16", "runner.log_every=16", "episode_length_s=0.2",
            "rewards.velocity.weights.alive=1e308"]
    code = train_cli.main(argv)
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err, err
    assert "all 128 transitions of the last log interval (env step 128) were quarantined" in err, err
    # Episodes of 10 steps ended inside the interval, so the term's episode metric names it.
    assert "reward/alive" in err, err
    assert not (out / "checkpoint.pt").exists()  # stopped before any save: nothing learnt is kept


# ---- 9. SIGTERM saves like the first Ctrl-C, then exits 143 ---------------------------------

def test_sigterm_during_training_saves_a_checkpoint_and_exits_143(tmp_path, capsys):
    def terminating_factory(task, **kwargs):
        env = fake_factory(task, **kwargs)
        original_step = env.step

        def step(action):
            if env.steps == 7:
                signal.raise_signal(signal.SIGTERM)  # a scheduler preempting the job
            return original_step(action)

        env.step = step
        return env

    out = tmp_path / "run"
    previous = signal.getsignal(signal.SIGTERM)
    argv = base_args(out) + ["--steps", "100000", *TINY_TOKENS]
    assert train_cli.main(argv, factory=terminating_factory, tasks=TASKS) == train_cli.EXIT_TERMINATED
    assert "termination request received; saving a checkpoint" in capsys.readouterr().err
    assert load_checkpoint(out / "checkpoint.pt")["counters"]["iterations"] == 8
    assert signal.getsignal(signal.SIGTERM) == previous


# ---- 10. the smaller ones -------------------------------------------------------------------

def test_a_save_left_half_written_by_kill_9_is_cleaned_by_the_next_run(run_copy):
    stale = run_copy / ".checkpoint.pt.k9x2_ab.tmp"
    stale.write_bytes(b"")
    assert run_train(base_args(run_copy) + ["--resume", str(run_copy / "checkpoint.pt"), *TINY_TOKENS]) == 0
    assert not stale.exists()


def test_a_save_of_a_file_a_tampered_run_wrote_is_still_loadable(finished, tmp_path):
    # Editing a checkpoint on purpose goes through save_checkpoint, which writes new digests.
    document = load_checkpoint(finished / "checkpoint.pt")
    document["env_overrides"] = {"max_episode_length": "12"}
    save_checkpoint(tmp_path / "edited.pt", {k: v for k, v in document.items()
                                             if k not in ("format", "format_version", "contract_version",
                                                          INTEGRITY_KEY)})
    assert load_checkpoint(tmp_path / "edited.pt")["env_overrides"] == {"max_episode_length": "12"}


@pytest.mark.parametrize(("override", "fragment"), [
    ("runner.snapshot_at_s=nan", "snapshot_at_s.0='nan': Input should be a finite number"),
    ("runner.snapshot_at_s=0.1000001,0.1000002,0.5", "would share the snapshot file name(s) ['checkpoint-0.1s.pt']"),
])
def test_snapshot_times_that_could_never_be_kept_apart_are_refused(tmp_path, capsys, override, fragment):
    # nan was accepted and never due; two times 1e-7 apart were kept in one file, the later replacing the earlier.
    refused(capsys, base_args(tmp_path / "run") + [override, *TINY_TOKENS], fragment)
    assert not (tmp_path / "run").exists()


def test_learner_settings_refused_by_the_learner_are_usage_errors_not_tracebacks(tmp_path, capsys):
    pytest.importorskip("unilab")
    argv = ["--task", "g1_motion_tracking", "--backend", "mujoco", "--num-envs", "2", "--steps", "4", "--out",
            str(tmp_path / "run"), "--no-progress", "--no-tensorboard", "batch_size=32", "learning_starts=64",
            "actor_width=16", "critic_width=16"]
    assert train_cli.main(argv + ["symmetry_augmentation=true"]) == BAD_INPUT
    assert "symmetry_augmentation=true needs a task that declares its left-right mirror" in capsys.readouterr().err
    refused(capsys, base_args(tmp_path / "run") + ["--algo", "fastsac", "v_min=5", "v_max=1", *TINY_TOKENS],
            "bad algorithm override: Value error, v_max must exceed v_min, got [5.0, 1.0]")
    assert not (tmp_path / "run").exists()
