"""unilab-play --video on the real env: an mp4 of env 0's first episode (needs EGL)."""

import ctypes.util
import os

import pytest

pytest.importorskip("unilab")


def test_play_writes_an_mp4_of_the_first_episode(tmp_path, capsys):
    import imageio
    import mujoco
    from unilab_rl.cli import play as play_cli
    from unilab_rl.cli import train as train_cli

    # The session starts on EGL unless told otherwise (the root conftest); only a machine without
    # the platform's library skips. Where it is installed, a renderer that fails is a failure.
    platform = os.environ.get("MUJOCO_GL", "egl")
    library = {"egl": "EGL", "osmesa": "OSMesa"}.get(platform)
    if library is not None and ctypes.util.find_library(library) is None:
        pytest.skip(f"MUJOCO_GL={platform}: no {library} library for offscreen rendering")
    mujoco.Renderer(mujoco.MjModel.from_xml_string("<mujoco/>"), 8, 8).close()
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
