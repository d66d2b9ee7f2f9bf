"""The reward, termination, curriculum and event managers: fused terms' weights, per-episode
sums, the terminations a reset forgets and the termination terms' resets, curriculum logging,
and when interval events fire. Each test fails on one small, deliberate change to the code it
names (recorded beside it) and passes on the code as written; expected values are counted by
hand."""

from __future__ import annotations

import pytest
import torch
from controlled_owner import controlled_cfg, force_done
from unilab.config import CurriculumTermCfg, EventTermCfg, RewardTermCfg, TerminationTermCfg
from unilab.managers.base import fused
from unilab.registry import register_task
from unilab.terms import rewards as rew

N = 4


class EpisodeStep:
    """Steps since this term's last reset, per row: state the manager's reset must restart."""

    def __init__(self, cfg, env) -> None:
        self.count = torch.zeros(env.num_envs, device=env.device)

    def __call__(self, env) -> torch.Tensor:
        self.count += 1.0
        return self.count.clone()

    def reset(self, done: torch.Tensor) -> None:
        self.count.masked_fill_(done, 0.0)


@fused("alive", "b")
def one_and_three(env) -> torch.Tensor:
    return torch.tensor([1.0, 3.0], device=env.device).expand(env.num_envs, 2)


def _reward_cfg():
    cfg = controlled_cfg()
    cfg.reward_scale_by_dt = False  # weights as written: the sums below are counted in steps
    cfg.rewards = {
        "alive": RewardTermCfg(func=rew.alive, weight=2.0),
        # component "alive" is taken by the term above; "b" has no weight of its own
        "fused": RewardTermCfg(func=one_and_three, weight=4.0, weights={"alive": 0.5}),
        "count": RewardTermCfg(func=EpisodeStep),
    }
    cfg.terminations = {k: v for k, v in cfg.terminations.items() if k in ("forced", "time_out")}
    return cfg


@pytest.fixture
def reward_env(make_env):
    register_task("test_review_reward_manager", _reward_cfg)
    return make_env(task="test_review_reward_manager")


# ---- fused weights: ``weight`` scales every component, a component without a weight weighs 0,
#      a component whose name is taken is prefixed with its term's ----------------------------------
# (mutants: ``given.get(c, 0.0) * term.cfg.weight`` -> ``given.get(c, 0.0)``; the missing weight
#  0.0 -> 1.0; the duplicate component name kept unprefixed)

def test_a_fused_terms_weight_scales_its_components_and_an_unweighted_one_weighs_nothing(reward_env):
    env = reward_env
    assert env.reward_manager.components == ["alive", "fused/alive", "b", "count"]
    _, reward, *_ = env.step(torch.zeros(N, env.action_dim))
    # alive 2 * 1; fused/alive 4 * 0.5 * 1; b 4 * 0 * 3; count 1 * 1 (first step)
    assert env.reward_manager.last_components.tolist() == [[2.0, 2.0, 0.0, 1.0]] * N
    assert reward.tolist() == [5.0] * N
    assert {"reward/alive", "reward/fused/alive", "reward/b", "reward/count"} <= set(env.metric_names)


# ---- episode sums restart with the episode, and the terms' own reset is called -------------------
# (mutants: ``episode_sums.masked_fill_(done, 0)`` dropped; ``reset_terms`` of the rewards dropped)

def test_a_second_episode_of_a_row_sums_only_its_own_steps(reward_env):
    env = reward_env
    zero = torch.zeros(N, env.action_dim)
    for _ in range(2):
        env.step(zero)
    force_done(env, torch.tensor([False, True, False, False]))
    env.step(zero)  # row 1's first episode ends after 3 steps
    assert env.reward_manager.episode_sums[1].tolist() == [0.0, 0.0, 0.0, 0.0]
    assert env.reward_manager.episode_sums[0].tolist() == [6.0, 6.0, 0.0, 6.0]  # count 1 + 2 + 3
    env.step(zero)
    assert env.reward_manager.last_components[:, 3].tolist() == [4.0, 1.0, 4.0, 4.0]  # row 1 restarted
    force_done(env, torch.tensor([False, True, False, False]))
    env.step(zero)  # row 1's second episode ends after 2 steps
    m = env.flush_metrics()
    assert m["episodes"] == 2.0
    # per-episode means over row 1's episodes of 3 and 2 steps
    assert m["reward/alive"] == pytest.approx((3 * 2.0 + 2 * 2.0) / 2)
    assert m["reward/count"] == pytest.approx(((1 + 2 + 3) + (1 + 2)) / 2)
    assert m["reward/b"] == 0.0


# ---- termination manager: a reset outside a step forgets what the last step fired -----------------
# (mutants: ``forget_fired`` leaving ``terminated`` or ``fired`` as the last step set them)

def test_a_reset_outside_a_step_forgets_the_last_steps_terminations(make_env):
    env = make_env()
    force_done(env, torch.tensor([True, False, False, False]))
    _, _, terminated, truncated, _ = env.step(torch.zeros(N, env.action_dim))
    manager = env.termination_manager
    forced = manager.names.index("forced")
    assert terminated.tolist() == [True, False, False, False] and manager.fired[0, forced]
    env.reset()
    assert not manager.terminated.any() and not manager.truncated.any() and not manager.fired.any()
    assert terminated.tolist() == [True, False, False, False]  # what the step returned is the caller's


class EveryThirdStep(EpisodeStep):
    """Terminal on the third step since the term's last reset."""

    def __call__(self, env) -> torch.Tensor:
        return super().__call__(env) >= 3.0


def _every_third_step_cfg():
    cfg = controlled_cfg()
    cfg.terminations = {"time_out": cfg.terminations["time_out"], "third": TerminationTermCfg(func=EveryThirdStep)}
    return cfg


# ---- termination terms with state are reset with the episodes they ended -------------------------
# (mutant: the termination manager's ``reset_terms`` dropped)

def test_a_termination_terms_reset_is_called_for_the_rows_that_ended(make_env):
    register_task("test_review_every_third_step", _every_third_step_cfg)
    env = make_env(task="test_review_every_third_step")
    ended = [env.step(torch.zeros(N, env.action_dim))[2].all().item() for _ in range(7)]
    assert ended == [False, False, True, False, False, True, False]


# ---- curriculum manager: every term runs each step, and a value stays logged until it changes ------
# (mutants: the logged state replaced by the last term's output instead of updated; only the first
#  term called)

class LogsOnceAt:
    """Logs {"stage": step} at the env step ``params.step`` only (a stage change), else nothing."""

    def __init__(self, cfg, env) -> None:
        self.at = cfg.params["step"]

    def __call__(self, env):
        return {"stage": env.common_step_counter} if env.common_step_counter == self.at else None


def _two_curricula_cfg():
    cfg = controlled_cfg()
    cfg.curriculum = {"early": CurriculumTermCfg(func=LogsOnceAt, params={"step": 1}),
                      "late": CurriculumTermCfg(func=LogsOnceAt, params={"step": 3})}
    return cfg


def test_each_curriculum_term_logs_and_its_last_value_is_kept(make_env):
    register_task("test_review_two_curricula", _two_curricula_cfg)
    env = make_env(task="test_review_two_curricula")
    zero = torch.zeros(N, env.action_dim)
    env.step(zero)
    assert env.flush_metrics()["curriculum/early/stage"] == 1.0
    for _ in range(3):
        env.step(zero)
    m = env.flush_metrics()
    assert m["curriculum/early/stage"] == 1.0 and m["curriculum/late/stage"] == 3.0
    assert isinstance(m["curriculum/late/stage"], float)


# ---- interval events: each event's own timer, a fresh period after it fires ------------------------

def _pushes(x_range, y_range, x_interval, y_interval):
    from unilab.terms.events import push_by_velocity

    def build():
        cfg = controlled_cfg()
        cfg.events["push_x"] = EventTermCfg(func=push_by_velocity, mode="interval", interval_range_s=x_interval,
                                            params={"velocity_range": {"x": x_range}})
        cfg.events["push_y"] = EventTermCfg(func=push_by_velocity, mode="interval", interval_range_s=y_interval,
                                            params={"velocity_range": {"y": y_range}})
        return cfg
    return build


# (mutants: ``txn.rows = fired[:, k]`` -> the rows any interval event hit; the step's pushed rows
#  taken from the first interval event's timer only)

def test_of_two_interval_events_only_the_one_that_fired_pushes(make_env):
    # push_y fires at every step (0.02 s), push_x every third; the twin draws the same numbers
    # and pushes by zero.
    register_task("test_review_two_pushes", _pushes((0.5, 0.5), (0.5, 0.5), (0.06, 0.06), (0.02, 0.02)))
    register_task("test_review_two_zero_pushes", _pushes((0.0, 0.0), (0.0, 0.0), (0.06, 0.06), (0.02, 0.02)))
    env, twin = make_env(task="test_review_two_pushes"), make_env(task="test_review_two_zero_pushes")
    zero = torch.zeros(N, env.action_dim)
    env.step(zero), twin.step(zero)
    assert env.event_manager.fired.tolist() == [[False, True]] * N
    delta = env.robot.qvel[:, :6] - twin.robot.qvel[:, :6]
    torch.testing.assert_close(delta, torch.tensor([0.0, 0.5, 0.0, 0.0, 0.0, 0.0]).expand(N, -1))


# (mutant: the fired timer carried on from its overshoot, ``time_left + period``, not restarted
#  at a fresh period)

def test_an_interval_event_fires_again_a_full_period_after_it_fired(make_env):
    # A 0.05 s period at 0.02 s steps: 0.03, 0.01, -0.01 (fires at step 3), then afresh from 0.05.
    register_task("test_review_push_period", _pushes((0.0, 0.0), (0.0, 0.0), (0.05, 0.05), (100.0, 100.0)))
    env = make_env(task="test_review_push_period")
    fired = []
    for _ in range(9):
        env.step(torch.zeros(N, env.action_dim))
        fired.append(bool(env.event_manager.fired[:, 0].all()))
    assert [k + 1 for k, f in enumerate(fired) if f] == [3, 6, 9]


# ---- a model-field event in interval mode is refused when the env is built ------------------------
# (mutant: the check on ``writes_model_field`` of the interval terms dropped)

def test_an_interval_model_field_event_is_refused_naming_it(make_env):
    from unilab.terms.events import randomize_friction

    def build():
        cfg = controlled_cfg()
        cfg.events["friction"] = EventTermCfg(func=randomize_friction, mode="interval", interval_range_s=(1.0, 2.0))
        return cfg

    register_task("test_review_interval_friction", build)
    with pytest.raises(ValueError, match=r"events\[interval\] term 'friction': model-field events run at startup or reset"):
        make_env(task="test_review_interval_friction")
