"""The "direct runtime" baseline of g1_motion_tracking: the same MDP, fused by hand.

``TrackingReference`` steps a unisim backend through its public contract only
(``backend.step``, ``backend.views()``, ``backend.set_state_where``), with no managers: one
``step(action)`` does, in the env's documented order,

1. action -> ctrl (``offset + scale * clip(action)``, the action manager's offset and scale);
2. physics (``backend.step(ctrl, decimation)``);
3. terminations of the tracking task (anchor height, anchor tilt, end-effector height; clip
   end and the episode time-out are time-outs) on the frame the policy saw, its target (the
   clip at the time of the state physics just reached);
4. the fused reward (six exp(-error / std^2) kernels, action rate, soft joint limits,
   undesired contacts; the task's weights times ``step_dt``) on that frame;
5. the command advance (frame + 1, held at the clip's last frame) and the interval pushes'
   timers;
6. final observations (policy 160, critic 286) on the post-physics state, advanced frames;
7. the reset of done rows: the adaptive sampler records failures and draws start frames
   (the task's ``StartSampler``; the target becomes the frame after), the reference state of
   the start frames with the task's reset noise and the pushes' velocity kicks go to ONE
   masked ``set_state_where`` call;
8. observations of the post-reset state; on-device telemetry, the sums the env's managers
   keep (reward episode sums, the command's error metrics, how often each termination
   condition fired, how many episodes ended).

The reference frames are the task's ``FrameTable``, packed once into one (frames, D) table
so each lookup is a single gather. Buffers are preallocated, there is no Python per env, no
row list and no host read, and draws from the one ``torch.Generator`` come in the env's
order, so from the same state, frames and generator state the two agree (tests compare
them). It is a benchmark baseline, not a training env: returned tensors are its buffers,
overwritten by the next step (copy what must outlive it, as a replay insert does).
"""

from __future__ import annotations

import math
import re

import torch
import unisim
from unilab.assets.motion import load_library
from unilab.config import EnvCfg
from unilab.registry import task_config
from unilab.tasks.tracking.config.g1 import tracking as g1_tracking
from unilab.tasks.tracking.mdp.frame_table import FrameTable
from unilab.tasks.tracking.mdp.sampling import StartSampler

from unilab import math as lm

_AXES = ("x", "y", "z", "roll", "pitch", "yaw")
POLICY_DIM, CRITIC_DIM = 160, 286


def _ranges(table: dict | None, device) -> tuple[torch.Tensor, torch.Tensor]:
    table = table or {}
    lo = torch.tensor([table.get(a, (0.0, 0.0))[0] for a in _AXES], device=device)
    hi = torch.tensor([table.get(a, (0.0, 0.0))[1] for a in _AXES], device=device)
    return lo, hi - lo


class TrackingReference:
    """g1_motion_tracking's MDP on ``backend`` (built for ``cfg``'s scene and contact
    sensors) without managers. Reads from ``cfg`` only what the task's config sets: clips,
    sampling, action scale, episode length, policy noise, reset noise and pushes (present or
    removed by overrides). Rewards, terminations and the observation layout are the task's."""

    def __init__(self, cfg: EnvCfg, backend: unisim.SimBackend, seed: int = 0, telemetry: bool = True) -> None:
        self.backend, self.cfg, self.telemetry = backend, cfg, telemetry
        dev = self.device = backend.device
        n = self.num_envs = backend.num_envs
        inv = backend.inventory()
        self.rng = torch.Generator(device=dev)
        self.rng.manual_seed(seed)
        self.decimation = cfg.decimation
        self.step_dt = float(backend.timestep) * cfg.decimation
        self.max_episode_length = math.ceil(cfg.episode_length_s / self.step_dt - 1e-9)

        # ---- layout: one free joint at qpos 0:7 / qvel 0:6, then the actuated joints ----
        free = [j for j in inv.joints if j.kind == "free"]
        actuators = sorted(inv.actuators, key=lambda a: a.index)
        joint_names = tuple(a.joint for a in actuators)
        joints = [inv.joint(j) for j in joint_names]
        qa, va = [j.qpos_adr for j in joints], [j.qvel_adr for j in joints]
        nj = len(joints)
        if len(free) != 1 or (free[0].qpos_adr, free[0].qvel_adr) != (0, 0) or qa != list(range(7, 7 + nj)) \
                or va != list(range(6, 6 + nj)):
            raise ValueError("TrackingReference: expects the free joint first and the actuated joints contiguous "
                             "after it, in actuator order (the G1 scene)")
        self.nj = nj
        key = inv.keyframe(cfg.reset_keyframe)
        default_qpos = torch.tensor(key.qpos, dtype=torch.float32, device=dev)
        self.default_qvel = torch.tensor(key.qvel, dtype=torch.float32, device=dev)
        self.default_joint_pos = default_qpos[7:7 + nj].clone()
        lim = torch.tensor([j.range for j in joints], dtype=torch.float32, device=dev)
        mid, half = lim.mean(dim=1), 0.5 * (lim[:, 1] - lim[:, 0]) * 0.9  # soft_factor 0.9 (rewards, reset)
        self.soft_lo, self.soft_hi = mid - half, mid + half

        # ---- actions ----
        act = cfg.actions
        if act.joint_names != (".*",):
            raise ValueError("TrackingReference: expects actions on every actuated joint")
        scale = [act.scale if isinstance(act.scale, float) else
                 next(v for p, v in act.scale.items() if re.fullmatch(p, j)) for j in joint_names]
        self.action_scale = torch.tensor(scale, dtype=torch.float32, device=dev)
        self.action_offset = self.default_joint_pos.clone() if act.use_default_offset else torch.zeros(nj, device=dev)
        self.action_clip = act.clip
        self.action = torch.zeros(n, nj, device=dev)
        self.prev_action = torch.zeros(n, nj, device=dev)
        self.ctrl = self.action_offset.expand(n, nj).clone()

        # ---- the command: frames of the task's FrameTable, packed into one table ----
        mc = cfg.commands[g1_tracking.COMMAND]
        bodies = tuple(mc.body_names)
        self.k = len(bodies)
        self.anchor = bodies.index(mc.anchor_body)
        body_index = [inv.body(b).index for b in bodies]
        library = load_library(list(mc.clips), mc.weights)
        table = FrameTable(list(library.clips), joint_names, inv.body(free[0].body).name, bodies,
                           1.0 / self.step_dt, dev, "TrackingReference")
        self.sampler = StartSampler([c.num_frames for c in library.clips], library.weights.tolist(),
                                    max(1, round(mc.bin_s / self.step_dt)), mc.sampling, mc.adaptive_uniform_ratio,
                                    mc.adaptive_alpha, mc.adaptive_kernel_size, mc.adaptive_lambda, dev)
        self.table = table.packed
        self._cols = table.columns
        self._twist = table.span("body_lin_vel", "body_ang_vel")  # adjacent: one view
        self.clip_length, self.clip_start = table.length, table.start
        # Robot bodies gathered per step: the anchor first, then the tracked bodies.
        self.body_gather = torch.tensor([body_index[self.anchor], *body_index], device=dev)
        self.vel_gather = torch.tensor(body_index, device=dev)

        # ---- rewards / terminations (the task's fused terms' parameters) ----
        rp = cfg.rewards["tracking"].params
        weights = cfg.rewards["tracking"].weights
        kernels = ("anchor_pos", "anchor_ori", "body_pos", "body_ori", "body_lin_vel", "body_ang_vel")
        self.neg_inv_var = torch.tensor([-1.0 / rp["std"][c] ** 2 for c in kernels], device=dev)
        comps = (*kernels, "action_rate", "joint_limits", "undesired_contacts")
        dt = self.step_dt if cfg.reward_scale_by_dt else 1.0
        self.weights = torch.tensor([weights.get(c, 0.0) * cfg.rewards["tracking"].weight for c in comps],
                                    device=dev) * dt
        self.contact_sensor = rp.get("contact_sensor")
        tp = cfg.terminations["tracking"].params
        ee = [bodies.index(b) for b in tp["end_effectors"]]
        self.z_select = torch.tensor([0, *(1 + e for e in ee)], device=dev)  # rows of the (anchor, bodies) stack
        self.z_limit = torch.tensor([tp["anchor_height"]] + [tp["end_effector_height"]] * len(ee), device=dev)
        self.tilt_half_limit = 0.5 * tp["anchor_ori"]
        self.time_out_on = "time_out" in cfg.terminations

        # ---- noise: policy observations, reset, pushes ----
        group = cfg.observations["policy"]
        lo, hi = [], []
        widths = {"command": 2 * nj, "motion_anchor_pos_b": 3, "motion_anchor_ori_b": 6, "base_lin_vel": 3,
                  "base_ang_vel": 3, "joint_pos": nj, "joint_vel": nj, "actions": nj}
        if tuple(group.terms) != tuple(widths):
            raise ValueError(f"TrackingReference: expects the policy terms {list(widths)}, got {list(group.terms)}")
        for name, t in group.terms.items():
            noise = t.noise if (group.enable_corruption and t.noise) else (0.0, 0.0)
            lo += [noise[0]] * widths[name]
            hi += [noise[1]] * widths[name]
        self.noise_lo = torch.tensor(lo, device=dev)
        self.noise_width = torch.tensor(hi, device=dev) - self.noise_lo
        self.policy_noise = bool((self.noise_width != 0).any())
        ep = cfg.events["reset_from_motion"].params
        self.pose_lo, self.pose_w = _ranges(ep.get("pose_range"), dev)
        self.vel_lo, self.vel_w = _ranges(ep.get("velocity_range"), dev)
        self.joint_noise = tuple(ep.get("joint_position_range", (0.0, 0.0)))
        push = cfg.events.get("push")
        self.pushes = push is not None
        if self.pushes:
            self.push_lo, self.push_w = _ranges(push.params.get("velocity_range"), dev)
            r = push.interval_range_s
            self.period_lo, self.period_w = float(r[0]), float(r[1] - r[0])
            self.push_time_left = self.period_lo + self.period_w * torch.rand(n, 1, generator=self.rng, device=dev)

        # ---- state and preallocated buffers ----
        i64 = dict(dtype=torch.int64, device=dev)
        self.clip = torch.zeros(n, **i64)
        self.frame = torch.ones(n, **i64)  # a target, one after a start frame
        self.last_frame = torch.zeros(n, **i64)
        self.frame_base = torch.zeros(n, **i64)
        self.index = torch.zeros(n, **i64)
        self.episode_length = torch.zeros(n, **i64)
        self.ref = torch.empty(n, self.table.shape[1], device=dev)
        self.ref_next = torch.empty_like(self.ref)
        self.start_ref = torch.empty_like(self.ref)  # the start frames' rows (one before the target)
        self.reset_qpos = default_qpos.expand(n, -1).clone()
        self.reset_qvel = self.default_qvel.expand(n, -1).clone()
        self.critic = torch.empty(n, CRITIC_DIM, device=dev)
        self.final_critic = torch.empty_like(self.critic)
        self.policy_buf = torch.empty(n, POLICY_DIM, device=dev)
        self.final_policy_buf = torch.empty_like(self.policy_buf)
        self.noise_buf = torch.empty(n, POLICY_DIM, device=dev)
        self.errors = torch.empty(n, 6, device=dev)
        self.episode_sums = torch.zeros(n, len(comps), device=dev)
        self.metric_sums = torch.zeros(7, device=dev)  # the command's error metrics, sampling entropy, top1
        self.episode_reward_sums = torch.zeros(len(comps), device=dev)  # over ended episodes
        self.termination_sums = torch.zeros(4 + self.time_out_on, device=dev)  # per condition, as the env counts
        self.episodes_ended = torch.zeros((), dtype=torch.int64, device=dev)
        self.all_rows = torch.ones(n, dtype=torch.bool, device=dev)
        self.reset()

    # ---- setup ------------------------------------------------------------------------
    def _set_frames(self, done: torch.Tensor, clip: torch.Tensor, frame: torch.Tensor) -> None:
        torch.where(done, clip, self.clip, out=self.clip)
        torch.where(done, frame, self.frame, out=self.frame)
        torch.sub(self.clip_length[self.clip], 1, out=self.last_frame)
        torch.index_select(self.clip_start, 0, self.clip, out=self.frame_base)

    def _lookup(self, out: torch.Tensor) -> torch.Tensor:
        torch.add(self.frame_base, self.frame, out=self.index)
        return torch.index_select(self.table, 0, self.index, out=out)

    def reset(self) -> dict[str, torch.Tensor]:
        """Every row starts an episode (as the env's construction does)."""
        self._reset(self.all_rows, torch.zeros_like(self.all_rows), None)
        return self._observe(self.ref, self.critic, self.policy_buf)

    def copy_from(self, qpos, qvel, clip, frame, episode_length, action, prev_action, sampler_failed=None,
                  sampler_probabilities=None, rng_state=None, push_time_left=None) -> None:
        """Start from a given state (every row written by one ``set_state_where``), frames and
        generator state: what a comparison with the Manager env copies over."""
        self._set_frames(self.all_rows, clip.to(self.device), frame.to(self.device))
        self.episode_length.copy_(episode_length)
        self.action.copy_(action)
        self.prev_action.copy_(prev_action)
        if sampler_failed is not None:
            self.sampler.failed.copy_(sampler_failed)
        if sampler_probabilities is not None:
            self.sampler.probabilities.copy_(sampler_probabilities)
        if rng_state is not None:
            self.rng.set_state(rng_state)
        if push_time_left is not None and self.pushes:
            self.push_time_left.copy_(push_time_left)
        self.backend.set_state_where(self.all_rows, qpos.contiguous(), qvel.contiguous())
        self._lookup(self.ref)

    # ---- the step ---------------------------------------------------------------------
    def step(self, action: torch.Tensor):
        """One env step; returns (obs, reward, terminated, truncated, final_obs) with obs
        and final_obs as {"policy", "critic"}."""
        self.prev_action.copy_(self.action)
        self.action.copy_(action)
        a = action.clamp(*self.action_clip) if self.action_clip is not None else action
        torch.addcmul(self.action_offset, a, self.action_scale, out=self.ctrl)
        self.backend.step(self.ctrl, self.decimation)
        views = self.backend.views()
        self.episode_length += 1

        # Robot: the anchor and the tracked bodies, one gather per view.
        bp = views.body_pos_w.index_select(1, self.body_gather)   # (N, K+1, 3), row 0 = anchor
        bq = views.body_quat_w.index_select(1, self.body_gather)  # (N, K+1, 4)
        n, k, c = self.num_envs, self.k, self._cols
        ref = self.ref  # the frame the policy acted on
        rbp = ref[:, c["body_pos"]].view(n, k, 3)
        rbq = ref[:, c["body_quat"]].view(n, k, 4)
        ref_ap, ref_aq = rbp[:, self.anchor], rbq[:, self.anchor]
        robot_ap, robot_aq = bp[:, 0], bq[:, 0]

        # The reference moved onto the robot anchor (yaw and xy), stacked after the global anchor.
        dq = lm.yaw_quat(lm.quat_mul(robot_aq, lm.quat_conjugate(ref_aq))).unsqueeze(1).expand(-1, k, -1)
        shift = torch.cat((robot_ap[:, :2], ref_ap[:, 2:]), dim=1).unsqueeze(1)
        ref_pos = torch.cat((ref_ap.unsqueeze(1), shift + lm.quat_apply(dq, rbp - ref_ap.unsqueeze(1))), dim=1)
        ref_quat = torch.cat((ref_aq.unsqueeze(1), lm.quat_mul(dq, rbq)), dim=1)
        diff = ref_pos - bp                                      # (N, K+1, 3)
        pos_sq = diff.square().sum(-1)                           # (N, K+1)
        ang = lm.quat_error_magnitude(ref_quat, bq)              # (N, K+1)
        ang_sq = ang.square()

        # Terminations (the frame the policy saw): heights and tilt; clip end and time-out. "Not
        # within" the limits, as the task's terms, so a diverged (NaN) world ends its episode.
        z_near = diff[..., 2].index_select(1, self.z_select).abs() <= self.z_limit  # anchor, then end effectors
        z_off = ~z_near.all(dim=1)
        tilt = ~((ref_aq[:, 1:3].square().sum(-1) - robot_aq[:, 1:3].square().sum(-1)).abs()
                 <= self.tilt_half_limit)  # projected gravity z = 2 (x^2 + y^2) - 1
        terminated = z_off | tilt
        clip_end = self.frame >= self.last_frame
        time_out = clip_end
        if self.time_out_on:
            episode_end = self.episode_length >= self.max_episode_length
            time_out = time_out | episode_end
        truncated = time_out & ~terminated
        done = terminated | truncated
        if self.telemetry:  # what the env's termination manager counts: each condition, each ended episode
            fired = [~z_near[:, 0], ~z_near[:, 1:].all(dim=1), tilt, clip_end, *([episode_end] if self.time_out_on else [])]
            self.termination_sums.add_(torch.stack(fired, dim=1).sum(dim=0))
            self.episodes_ended.add_(done.sum())

        # Rewards: one (N, 9) matrix, weighted once.
        rv = ref[:, self._twist].view(n, 2, k, 3)
        vel = torch.stack((views.body_lin_vel_w.index_select(1, self.vel_gather),
                           views.body_ang_vel_w.index_select(1, self.vel_gather)), dim=1)
        vel_sq = (rv - vel).square().sum(-1).mean(-1)            # (N, 2)
        torch.stack((pos_sq[:, 0], ang_sq[:, 0], pos_sq[:, 1:].mean(1), ang_sq[:, 1:].mean(1),
                     vel_sq[:, 0], vel_sq[:, 1]), dim=1, out=self.errors)
        q = views.qpos[:, 7:7 + self.nj]
        contacts = (views.contacts[self.contact_sensor].in_contact.sum(-1, dtype=torch.float32)
                    if self.contact_sensor is not None else torch.zeros_like(pos_sq[:, 0]))
        raw = torch.cat((torch.exp(self.errors * self.neg_inv_var), torch.stack((
            (self.action - self.prev_action).square().sum(1),
            (q - torch.clamp(q, self.soft_lo, self.soft_hi)).abs().sum(1),
            contacts), dim=1)), dim=1)
        weighted = raw * self.weights
        reward = weighted.sum(1)
        if self.telemetry:
            self.episode_sums += weighted
            self.metric_sums[:5].add_(torch.stack((pos_sq[:, 0].sqrt().mean(), ang[:, 0].mean(),
                                                 pos_sq[:, 1:].sqrt().mean(), ang[:, 1:].mean(),
                                                 (ref[:, c["joint_pos"]] - q).abs().mean())))

        # Command advance; push timers tick.
        torch.minimum(self.frame + 1, self.last_frame, out=self.frame)
        if self.pushes:
            self.push_time_left -= self.step_dt
            fired = self.push_time_left <= 0.0
            period = torch.empty(n, 1, device=self.device).uniform_(self.period_lo, self.period_lo + self.period_w,
                                                                    generator=self.rng)
            torch.where(fired, period, self.push_time_left, out=self.push_time_left)
            pushed = fired[:, 0]
        else:
            pushed = None

        # Final observations: post-physics state, advanced frames.
        self._lookup(self.ref_next)
        final = self._observe(self.ref_next, self.final_critic, self.final_policy_buf, bp, bq)

        # Reset of the done rows (masked, one set_state_where) and the new observations.
        self._reset(done, terminated, pushed)
        obs = self._observe(self.ref, self.critic, self.policy_buf)
        return obs, reward, terminated, truncated, final

    def _reset(self, done: torch.Tensor, failed: torch.Tensor, pushed: torch.Tensor | None) -> None:
        n, dev, c, rng = self.num_envs, self.device, self._cols, self.rng
        if self.telemetry:
            self.episode_reward_sums += (self.episode_sums * done.unsqueeze(1)).sum(0)
            self.episode_sums.masked_fill_(done.unsqueeze(1), 0.0)
        rows = done.unsqueeze(1)
        self.action.masked_fill_(rows, 0.0)
        self.prev_action.masked_fill_(rows, 0.0)
        self.sampler.record(self.clip, self.frame - 1, failed)  # the failing state's frame
        if self.telemetry:
            entropy, top = self.sampler.entropy_and_top()
            self.metric_sums[5:].add_(torch.stack((entropy, top)))  # in place on the slice: no copy back
        clip, frame = self.sampler.sample(n, rng)
        self._set_frames(done, clip, frame + 1)
        self.episode_length.masked_fill_(done, 0)
        self._lookup(self.ref)
        ref = torch.index_select(self.table, 0, self.index - 1, out=self.start_ref)

        # The episode start of every row (only done rows are committed): the frame's state + noise.
        pose = torch.addcmul(self.pose_lo, self.pose_w, torch.rand(n, 6, generator=rng, device=dev))
        vel = torch.addcmul(self.vel_lo, self.vel_w, torch.rand(n, 6, generator=rng, device=dev))
        quat = lm.quat_mul(lm.quat_from_euler_xyz(pose[:, 3], pose[:, 4], pose[:, 5]), ref[:, c["root_quat"]])
        rq, rv, nj = self.reset_qpos, self.reset_qvel, self.nj
        torch.add(ref[:, c["root_pos"]], pose[:, :3], out=rq[:, 0:3])
        rq[:, 3:7] = quat
        torch.add(ref[:, c["root_lin_vel"]], vel[:, :3], out=rv[:, 0:3])
        rv[:, 3:6] = lm.quat_apply_inverse(quat, ref[:, c["root_ang_vel"]] + vel[:, 3:])
        joints = ref[:, c["joint_pos"]]
        if self.joint_noise != (0.0, 0.0):
            lo, hi = self.joint_noise
            joints = torch.empty(joints.shape, device=dev).uniform_(lo, hi, generator=rng).add_(joints)
        torch.clamp(joints, self.soft_lo, self.soft_hi, out=rq[:, 7:7 + nj])
        rv[:, 6:6 + nj] = ref[:, c["joint_vel"]]

        views = self.backend.views()
        qpos = torch.where(rows, rq, views.qpos)
        if pushed is not None:
            kick = torch.addcmul(self.push_lo, self.push_w, torch.rand(n, 6, generator=rng, device=dev))
            qvel = torch.where(rows, rv, views.qvel)
            qvel[:, :6].addcmul_(kick, torch.gt(pushed, done).unsqueeze(1))  # pushed rows that do not reset
            mask = done | pushed
        else:
            qvel = torch.where(rows, rv, views.qvel)
            mask = done
        self.backend.set_state_where(mask, qpos, qvel)

    def _observe(self, ref: torch.Tensor, critic: torch.Tensor, policy: torch.Tensor,
                 bp: torch.Tensor | None = None, bq: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        """Critic (286) written in one cat; the policy (160) is its head plus noise."""
        views = self.backend.views()
        if bp is None:
            bp = views.body_pos_w.index_select(1, self.body_gather)
            bq = views.body_quat_w.index_select(1, self.body_gather)
        n, k, c, nj = self.num_envs, self.k, self._cols, self.nj
        rbp = ref[:, c["body_pos"]].view(n, k, 3)
        rbq = ref[:, c["body_quat"]].view(n, k, 4)
        a = self.anchor
        # Row 0: the reference anchor; rows 1..K: the robot's tracked bodies; in the robot anchor frame.
        anchor_q = bq[:, :1].expand(-1, k + 1, -1)
        pos_b = lm.quat_apply_inverse(anchor_q, torch.cat((rbp[:, a:a + 1], bp[:, 1:]), dim=1) - bp[:, :1])
        ori_b = lm.matrix_first_two_columns(lm.quat_mul(lm.quat_conjugate(anchor_q),
                                                        torch.cat((rbq[:, a:a + 1], bq[:, 1:]), dim=1)))
        qpos, qvel = views.qpos, views.qvel
        torch.cat((ref[:, :2 * nj], pos_b[:, 0], ori_b[:, 0], lm.quat_apply_inverse(qpos[:, 3:7], qvel[:, 0:3]),
                   qvel[:, 3:6], qpos[:, 7:7 + nj] - self.default_joint_pos, qvel[:, 6:6 + nj], self.action,
                   pos_b[:, 1:].reshape(n, 3 * k), ori_b[:, 1:].reshape(n, 6 * k)), dim=1, out=critic)
        head = critic[:, :POLICY_DIM]
        if self.policy_noise:
            torch.rand(self.noise_buf.shape, generator=self.rng, device=self.device, out=self.noise_buf)
            torch.add(head, self.noise_lo, out=policy)
            policy.addcmul_(self.noise_width, self.noise_buf)
            head = policy
        return {"policy": head, "critic": critic}


def make_tracking_reference(task: str = "g1_motion_tracking", backend: str = "mujoco", num_envs: int = 1,
                            device=None, seed: int = 0, overrides=None, backend_options=None,
                            telemetry: bool = True) -> TrackingReference:
    """A reference loop on its own backend, for the task's config with ``overrides`` (the
    same arguments as ``make_manager_based_rl_env``)."""
    cfg = task_config(task, overrides)
    options = {"validate": False, **cfg.backend_options, **dict(backend_options or {})}
    contacts = [unisim.ContactSensorSpec(name=name, **s.model_dump()) for name, s in cfg.contact_sensors.items()]
    sim = unisim.create_backend(backend, model=str(cfg.scene()), num_envs=num_envs, device=device,
                                contact_sensors=contacts, **options)
    try:
        return TrackingReference(cfg, sim, seed=seed, telemetry=telemetry)
    except BaseException:
        sim.close()
        raise


def copy_env_into(reference: TrackingReference, env) -> None:
    """Put ``env``'s state, command frames, episode lengths, actions, sampler and generator
    state into ``reference`` (setup for a comparison; reads the env, never writes it)."""
    motion = env.command_manager.term(g1_tracking.COMMAND, "copy_env_into")
    em = env.event_manager
    reference.copy_from(env.robot.qpos.clone(), env.robot.qvel.clone(), motion.clip, motion.frame,
                        env.episode_length, env.action_manager.action, env.action_manager.prev_action,
                        motion.sampler.failed, motion.sampler.probabilities, env.rng.get_state(),
                        em.time_left if em.interval_terms else None)
