"""Command manager: the env's command terms (a velocity twist, a motion clip, ...).

A command term is a ``CommandTerm`` subclass built from its ``CommandTermCfg`` subclass
(``cfg.term_class``). It owns its command tensor and decides how it evolves; the manager
only calls it at fixed points of the step (see ``ManagerBasedRlEnv``):

- ``metrics()`` after rewards, before ``step``: the term's declared metrics for this
  step, scored against the command the policy acted on;
- ``step(dt)`` then advances it (timers tick, expired rows resample, clips advance);
- ``reset(done)`` in the reset transaction, for the rows starting an episode;
- ``refresh()`` after the transaction wrote state (a command may depend on the state).

A term that adapts to training (the tracking task's start sampler) returns what it learned
from ``state_dict()`` and takes it back in ``load_state_dict``: a resumed run goes on from it.
"""

from __future__ import annotations

import torch

from unilab.config import CommandTermCfg


class CommandTerm:
    """Base of command terms. Subclasses set ``self.command`` ((N, d) tensor, what
    observations and rewards read) and may declare ``metric_names`` and override
    ``metrics`` to return their (k,) per-step values (averaged over envs)."""

    metric_names: tuple[str, ...] = ()

    def __init__(self, cfg: CommandTermCfg, env) -> None:
        self.cfg, self.env = cfg, env
        self.command: torch.Tensor

    def metrics(self) -> torch.Tensor | None:
        return None

    def step(self, dt: float) -> None:
        """Advance by one env step of ``dt`` seconds."""

    def reset(self, done: torch.Tensor) -> None:
        """Start the ``done`` rows' commands (masked: no row list)."""

    def refresh(self) -> None:
        """Recompute after the reset transaction wrote new state."""

    def state_dict(self) -> dict[str, torch.Tensor]:
        """What the term learned during training (CPU tensors); none by default."""
        return {}

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        """Take back what ``state_dict`` returned (in a freshly built env of the same task)."""
        if state:
            raise ValueError(f"{type(self).__name__} keeps no training state, got {sorted(state)}")


class CommandManager:
    def __init__(self, cfg: dict[str, CommandTermCfg], env) -> None:
        self.terms: dict[str, CommandTerm] = {}
        self._metric_slots: list[tuple[CommandTerm, slice]] = []
        for name, c in cfg.items():
            owner = f"commands term {name!r}"
            try:
                term = c.term_class(c, env)
            except (ValueError, KeyError, TypeError) as exc:
                msg = str(exc)
                raise ValueError(msg if msg.startswith(owner) else f"{owner}: {msg}") from None
            if not isinstance(term, CommandTerm):
                raise TypeError(f"{owner}: {c.term_class.__name__} is not a CommandTerm")
            self.terms[name] = term
            if term.metric_names:
                slot = env.metric_manager.declare([f"metrics/{name}/{m}" for m in term.metric_names], "step", owner)
                self._metric_slots.append((term, slot))
        self._list = list(self.terms.values())

    def term(self, name: str, owner: str = "command") -> CommandTerm:
        term = self.terms.get(name)
        if term is None:
            raise ValueError(f"{owner}: unknown command {name!r}; available: {list(self.terms)}")
        return term

    def record_metrics(self, metric_manager) -> None:
        for term, slot in self._metric_slots:
            metric_manager.add(slot, term.metrics())

    def step(self, dt: float) -> None:
        for t in self._list:
            t.step(dt)

    def reset(self, done: torch.Tensor) -> None:
        for t in self._list:
            t.reset(done)

    def refresh(self) -> None:
        for t in self._list:
            t.refresh()

    def state_dict(self) -> dict[str, dict[str, torch.Tensor]]:
        return {name: term.state_dict() for name, term in self.terms.items()}

    def load_state_dict(self, state: dict[str, dict[str, torch.Tensor]]) -> None:
        if not isinstance(state, dict) or set(state) != set(self.terms):
            names = sorted(state) if isinstance(state, dict) else state
            raise ValueError(f"commands: a training state for the commands {names}; this env has {sorted(self.terms)}")
        loaded = []
        before = self.state_dict()
        for name, term in self.terms.items():
            try:
                term.load_state_dict(state[name])
            except (ValueError, KeyError, TypeError) as error:
                for done in loaded:  # a refused state changes nothing: the terms already loaded go back
                    self.terms[done].load_state_dict(before[done])
                raise ValueError(f"commands term {name!r}: {error}") from None
            loaded.append(name)
