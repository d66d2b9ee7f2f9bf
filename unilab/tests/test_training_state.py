"""The env's training state: what a resumed run takes into its fresh env (the step count a
curriculum reads, what command terms learned), and bad states refused without a change."""

from __future__ import annotations

import pytest
import torch


def test_the_tracking_samplers_failure_statistics_carry_into_a_fresh_env(make_env):
    trained = make_env(task="g1_motion_tracking", num_envs=4)
    sampler = trained.command_manager.term("motion").sampler
    bins = sampler.failed.shape[0]
    clip = torch.zeros(3, dtype=torch.int64)
    sampler.record(clip, torch.tensor([0, 1, 2 * sampler.bin_frames]), torch.tensor([True, True, True]))
    for _ in range(3):
        trained.step(torch.zeros(4, trained.action_dim))
    state = trained.training_state()
    assert state["step_counter"] == 3 and state["commands"]["motion"]["failed"].device.type == "cpu"

    fresh = make_env(task="g1_motion_tracking", num_envs=4, seed=1)
    before = fresh.command_manager.term("motion").sampler.probabilities.clone()
    fresh.load_training_state(state)
    loaded = fresh.command_manager.term("motion").sampler
    assert fresh.common_step_counter == 3
    assert torch.equal(loaded.failed, sampler.failed) and torch.equal(loaded.probabilities, sampler.probabilities)
    assert not torch.equal(before, loaded.probabilities) and bins > 2  # adaptive: the failed bins draw more


@pytest.mark.parametrize("edit, match", [
    (lambda s: {**s, "extra": 1}, "expected the keys"),
    (lambda s: {**s, "step_counter": -1}, "step_counter=-1"),
    (lambda s: {**s, "step_counter": True}, "step_counter=True"),
    (lambda s: {**s, "commands": {"twist": {}}}, "commands"),
    (lambda s: {**s, "commands": {"motion": {"failed": torch.zeros(1)}}}, "start sampler"),
    (lambda s: {**s, "commands": {"motion": {"failed": torch.full_like(s["commands"]["motion"]["failed"], -1.0)}}},
     "start sampler"),
])
def test_a_state_of_another_env_is_refused_naming_it_and_changes_nothing(make_env, edit, match):
    env = make_env(task="g1_motion_tracking", num_envs=4)
    env.step(torch.zeros(4, env.action_dim))
    state = env.training_state()
    failed = env.command_manager.term("motion").sampler.failed.clone()
    with pytest.raises(ValueError, match=match):
        env.load_training_state(edit(state))
    assert env.common_step_counter == 1
    assert torch.equal(env.command_manager.term("motion").sampler.failed, failed)


def test_a_walking_env_carries_its_step_count_and_refuses_a_tracking_state(make_env):
    walk = make_env(task="g1_walk_flat", num_envs=4)
    state = walk.training_state()
    assert state == {"step_counter": 0, "commands": {"twist": {}}}
    with pytest.raises(ValueError, match=r"commands \['motion'\]; this env has \['twist'\]"):
        walk.load_training_state({"step_counter": 5, "commands": {"motion": {}}})
    walk.load_training_state({"step_counter": 5, "commands": {"twist": {}}})
    assert walk.common_step_counter == 5


def test_a_state_refused_by_a_later_command_term_leaves_the_earlier_ones_as_they_were():
    from types import SimpleNamespace

    from unilab.managers.command import CommandManager, CommandTerm

    class Counting(CommandTerm):
        def __init__(self, cfg, env) -> None:
            super().__init__(cfg, env)
            self.count = torch.zeros(1)

        def state_dict(self):
            return {"count": self.count.clone()}

        def load_state_dict(self, state):
            if set(state) != {"count"}:
                raise ValueError(f"expected 'count', got {sorted(state)}")
            self.count.copy_(state["count"])

    manager = CommandManager({}, SimpleNamespace())
    manager.terms = {"a": Counting(None, None), "b": Counting(None, None)}
    with pytest.raises(ValueError, match="commands term 'b'"):
        manager.load_state_dict({"a": {"count": torch.ones(1)}, "b": {"wrong": torch.ones(1)}})
    assert manager.terms["a"].count.item() == 0.0
