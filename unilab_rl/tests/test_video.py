"""unilab-play --video on the real env: an mp4 of env 0's first episode (needs EGL)."""

import os

import pytest

pytest.importorskip("unilab")
os.environ.setdefault("MUJOCO_GL", "egl")


def test_play_writes_an_mp4_of_the_first_episode(tmp_path, capsys):
    import imageio
    import mujoco
    from unilab_rl.cli import play as play_cli
    from unilab_rl.cli import train as train_cli

    try:
        mujoco.Renderer(mujoco.MjModel.from_xml_string("<mujoco/>"), 8, 8).close()
    except Exception as error:  # noqa: BLE001 - any GL failure means: no offscreen rendering here
        pytest.skip(f"no offscreen OpenGL: {error}")
    out = tmp_path / "run"
    train = ["--task", "g1_walk_flat", "--backend", "mujoco", "--num-envs", "2", "--steps", "4", "--out", str(out),
             "--no-progress", "--no-tensorboard", "actor_width=8", "critic_width=8", "critic_bins=11",
             "batch_size=8", "learning_starts=8"]
    assert train_cli.main(train) == 0
    video = tmp_path / "play.mp4"
    argv = ["--checkpoint", str(out / "checkpoint.pt"), "--num-envs", "2", "--episodes", "1", "--video", str(video)]
    assert play_cli.main(argv) == 0
    assert "frames of env 0's first episode" in capsys.readouterr().out
    frames = imageio.get_reader(str(video)).count_frames()
    assert frames > 5
