"""Curriculum manager: terms called once per env step with ``term(env)``; a term may
return a dict of plain-Python floats to log. Terms decide on host-side counters (the
env's step count), so a curriculum costs no device sync. A term with ``reset(done)``
(the terrain levels) also acts in the step's reset transaction, on the rows whose episodes
ended, before any other manager's reset: masked tensors only, again no sync."""

from __future__ import annotations

from unilab.config import CurriculumTermCfg
from unilab.managers.base import build_term, reset_terms


class CurriculumManager:
    def __init__(self, cfg: dict[str, CurriculumTermCfg], env) -> None:
        self.terms = [build_term("curriculum", n, tc, env) for n, tc in cfg.items()]
        # The terms that act in the reset transaction; the env calls reset() only when there are any.
        self.resetting = [t for t in self.terms if t.reset is not None]
        self.state: dict[str, float] = {}

    def update(self, env) -> None:
        for t in self.terms:
            out = t.fn(env)
            if out:
                self.state.update({f"curriculum/{t.name}/{k}": float(v) for k, v in out.items()})

    def reset(self, done) -> None:
        reset_terms(self.resetting, done)
