"""Recorder manager: on-device ring buffers of per-step term outputs (e.g. for replay
or video); nothing leaves the device until ``data()`` is called."""

from __future__ import annotations

import torch

from unilab.config import RecorderTermCfg
from unilab.managers.base import build_term


class RecorderManager:
    def __init__(self, cfg: dict[str, RecorderTermCfg], env) -> None:
        self.terms = [build_term("recorders", n, tc, env) for n, tc in cfg.items()]
        self.buffers: dict[str, torch.Tensor] = {}
        for t in self.terms:
            sample = t.fn(env)
            self.buffers[t.name] = torch.zeros(t.cfg.capacity, *sample.shape, dtype=sample.dtype, device=env.device)
        self.count = 0  # host counter: the ring position needs no device read

    def record(self, env) -> None:
        for t in self.terms:
            buf = self.buffers[t.name]
            buf[self.count % buf.shape[0]].copy_(t.fn(env))
        self.count += 1

    def data(self) -> dict[str, torch.Tensor]:
        """Recorded steps in time order, each (T, ...) on the env device."""
        out = {}
        for t in self.terms:
            buf = self.buffers[t.name]
            cap = buf.shape[0]
            if self.count <= cap:
                out[t.name] = buf[:self.count]
            else:
                start = self.count % cap
                out[t.name] = torch.cat((buf[start:], buf[:start]))
        return out
