"""unilab-export writes only where it may: never over a run's files, and a failed export leaves
the previous one as it was (real env: unilab, mujoco, CPU)."""

import shutil

import pytest
from unilab_rl.cli import export as export_cli
from unilab_rl.cli import train as train_cli

pytest.importorskip("unilab")
pytest.importorskip("onnxruntime")

TINY = ["batch_size=32", "learning_starts=64", "actor_width=32", "critic_width=32"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    out = tmp_path_factory.mktemp("trained") / "run"
    argv = ["--task", "g1_walk_flat", "--backend", "mujoco", "--algo", "fastsac", "--num-envs", "4", "--steps", "40",
            "--out", str(out), "--no-progress", "--no-tensorboard", *TINY]
    assert train_cli.main(argv) == 0
    return out


@pytest.fixture
def run(trained, tmp_path_factory):
    """A copy of the tiny run per test: a test that fails must not spoil the next one's files."""
    return shutil.copytree(trained, tmp_path_factory.mktemp("copy") / "run")


def contents(folder):
    return {path.name: path.read_bytes() for path in folder.iterdir() if path.is_file()}


def test_out_equal_to_the_checkpoint_is_refused_and_the_checkpoint_kept(run, capsys):
    before = contents(run)
    checkpoint = run / "checkpoint.pt"
    argv = ["--checkpoint", str(checkpoint), "--format", "torchscript", "--out", str(checkpoint)]
    assert export_cli.main(argv) == export_cli.EXIT_BAD_INPUT
    assert "--out" in capsys.readouterr().err
    assert contents(run) == before


@pytest.mark.parametrize(("fmt", "name"), [("onnx", "run.onnx"), ("torchscript", "summary.pt")])
def test_out_whose_metadata_file_is_a_run_file_is_refused_and_the_run_file_kept(run, capsys, fmt, name):
    before = contents(run)
    argv = ["--checkpoint", str(run / "checkpoint.pt"), "--format", fmt, "--out", str(run / name)]
    assert export_cli.main(argv) == export_cli.EXIT_BAD_INPUT
    error = capsys.readouterr().err
    assert "--out" in error and "would overwrite the run file" in error
    assert contents(run) == before  # run.json / summary.json unchanged, nothing written


def test_out_that_is_a_snapshot_of_a_run_or_a_directory_is_refused(run, tmp_path, capsys):
    snapshot = tmp_path / "checkpoint-90s.pt"
    snapshot.write_bytes(b"another run's snapshot")
    (tmp_path / "policy.pt").mkdir()
    for out in (snapshot, tmp_path / "policy.pt"):
        argv = ["--checkpoint", str(run / "checkpoint.pt"), "--format", "torchscript", "--out", str(out)]
        assert export_cli.main(argv) == export_cli.EXIT_BAD_INPUT
        assert "--out" in capsys.readouterr().err
    assert snapshot.read_bytes() == b"another run's snapshot" and (tmp_path / "policy.pt").is_dir()


@pytest.mark.parametrize("fmt", ["onnx", "torchscript"])
def test_failed_verification_keeps_the_previous_export_and_leaves_no_temporary_file(run, tmp_path, monkeypatch,
                                                                                      fmt):
    out = tmp_path / ("policy.onnx" if fmt == "onnx" else "policy.pt")
    argv = ["--checkpoint", str(run / "checkpoint.pt"), "--format", fmt, "--out", str(out), "--verify-steps", "4"]
    assert export_cli.main(argv) == 0
    good = contents(tmp_path)
    assert sorted(good) == sorted([out.name, "policy.json"])

    # The second export differs in its metadata (so an overwrite would show in the bytes) and
    # its file disagrees with torch.
    metadata = export_cli.deployment_metadata
    monkeypatch.setattr(export_cli, "deployment_metadata", lambda *a: {**metadata(*a), "attempt": 2})
    run_exported = export_cli.run_exported
    monkeypatch.setattr(export_cli, "run_exported", lambda path, obs: run_exported(path, obs) + 1.0)
    assert export_cli.main(argv) == export_cli.EXIT_MISMATCH
    assert contents(tmp_path) == good  # byte-identical
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(good)  # no temporary file left beside them


def test_a_first_export_that_fails_verification_leaves_nothing(run, tmp_path, monkeypatch):
    out = tmp_path / "policy.onnx"
    run_exported = export_cli.run_exported
    monkeypatch.setattr(export_cli, "run_exported", lambda path, obs: run_exported(path, obs) + 1.0)
    argv = ["--checkpoint", str(run / "checkpoint.pt"), "--out", str(out), "--verify-steps", "4"]
    assert export_cli.main(argv) == export_cli.EXIT_MISMATCH
    assert list(tmp_path.iterdir()) == []
