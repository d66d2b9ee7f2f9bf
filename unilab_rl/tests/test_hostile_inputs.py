"""An adversarial user's report, each case replayed: files that would run code when loaded,
links planted where a run writes, outputs that name a device, interrupts before training,
a full disk, rewards that overflow, sizes that exhaust memory or threads, a changed task."""

import json
import os

import pytest
import torch
from fake_env import PointMassEnv
from unilab_rl.cli import ppo as ppo_cli

TINY_PPO = ["actor.hidden_dims=[16,16]", "critic.hidden_dims=[16,16]", "num_steps_per_env=8",
            "algorithm.num_mini_batches=2", "algorithm.num_learning_epochs=1"]


def point_factory(task, *, backend, num_envs, device, seed, overrides):
    return PointMassEnv(num_envs=num_envs, seed=seed)


def ppo_args(out, iterations, *extra):
    return ["--task", "point", "--backend", "fake", "--num-envs", "4", "--iterations", str(iterations),
            "--out", str(out), "--export", "none", *TINY_PPO, *extra]


class WritesMarker:
    """Unpickled by a loader that runs code, this writes ``marker`` through a shell command."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


@pytest.mark.parametrize("flag", ["--resume", "--play"])
def test_ppo_refuses_a_model_whose_unpickling_would_run_code(tmp_path, capsys, flag):
    pytest.importorskip("rsl_rl")
    first = tmp_path / "first"
    assert ppo_cli.main(ppo_args(first, 1), factory=point_factory) == 0
    model = first / json.loads((first / "run.json").read_text())["model"]
    saved = torch.load(model, weights_only=True)
    marker = tmp_path / "marker"
    crafted = first / "model_crafted.pt"
    torch.save({**saved, "infos": {**saved["infos"], "payload": WritesMarker(marker)}}, crafted)
    capsys.readouterr()
    out = tmp_path / "run"
    argv = ppo_args(out, 1, "--resume", str(crafted)) if flag == "--resume" else ["--play", str(crafted), "--episodes", "1"]
    assert ppo_cli.main(argv, factory=point_factory) == ppo_cli.EXIT_BAD_INPUT
    assert not marker.exists()
    err = capsys.readouterr().err
    assert f"unilab-ppo: error: {flag} {crafted}: refused" in err, err
    assert not out.exists()
    # The run's own model still loads both ways.
    assert ppo_cli.main(["--play", str(model), "--episodes", "1", "--num-envs", "2"], factory=point_factory) == 0
    assert ppo_cli.main(ppo_args(tmp_path / "resumed", 1, "--resume", str(model)), factory=point_factory) == 0
