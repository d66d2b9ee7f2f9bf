"""The raw-physics rows of the env benchmark step physics with the control input of the row
they are the denominator of (env_zero), in every round, not the random policy's last ctrl."""

from __future__ import annotations

import torch
from unilab_bench import env_step as bench
from unilab_bench import gap_rows


def test_every_raw_row_of_every_round_holds_the_zero_policys_ctrl(tmp_path, monkeypatch):
    seen: list[tuple[str, torch.Tensor, torch.Tensor]] = []

    def spying(name, real):
        def row(env, *args, **kwargs):
            # The zero policy's ctrl: the action manager's offset in every column.
            zero_ctrl = env.action_manager.offset_full.expand_as(env.action_manager.ctrl)
            seen.append((name, env.action_manager.ctrl.clone(), zero_ctrl.clone()))
            return real(env, *args, **kwargs)
        return row

    monkeypatch.setattr(bench, "_raw_sample", spying("raw", bench._raw_sample))
    for name in ("raw_with_state_write", "raw_with_torch_ops"):
        monkeypatch.setattr(gap_rows, name, spying(name, getattr(gap_rows, name)))
    threads = torch.get_num_threads()
    try:
        bench.main(["--backend", "mujoco", "--num-envs", "2", "--steps", "2", "--warmup", "1", "--samples", "3",
                    "--compare-task", "", "--gap-rows", "--out", str(tmp_path / "b.json")])
    finally:
        torch.set_num_threads(threads)
    rounds = [s for s in seen if s[0] == "raw"][1:]  # the first is the warm-up's
    assert len(rounds) == 3
    for name, ctrl, zero_ctrl in seen:
        assert torch.equal(ctrl, zero_ctrl), f"{name}: raw physics held another ctrl than env_zero's"
