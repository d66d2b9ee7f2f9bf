"""The one term protocol every manager speaks, and turning a term config into a ``Term``.

A term is a callable plus, optionally:

- ``reset(done)``: called with the (N,) bool mask of rows starting an episode (masks, not
  row lists, keep the reset free of host syncs);
- ``components``: the names of the columns of a fused output. A fused reward or
  termination term returns ``(N, k)``, one column per component; a fused observation term
  may give widths (``{"name": width}``), its output being their concatenation.

Function terms ``f(env, **params)`` get their params bound once; class terms
``C(cfg, env)`` resolve names once in ``__init__``. Manager-specific call arguments are
fixed per manager (``term(env)``; event terms ``term(env, txn)``, see ``managers.event``).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from typing import Any

import torch
from unisim import Feature

from unilab.robot import MissingCapability


def requires(*features: Feature, model_fields: tuple[str, ...] = (), sensor_kinds: tuple[str, ...] = ()):
    """Declare the capabilities a function term needs; checked when the manager is built."""
    def mark(func):
        func.requirements = (tuple(features), tuple(model_fields), tuple(sensor_kinds))
        return func
    return mark


def fused(*components: str):
    """Declare a function term's fused output columns (a class term sets ``components``)."""
    def mark(func):
        func.components = tuple(components)
        return func
    return mark


class Term:
    """A built term: ``fn`` (the callable), ``reset`` (or None), ``components`` (component
    name -> width, or None for a single output) and ``obj`` (the class term's instance)."""

    __slots__ = ("cfg", "components", "fn", "name", "obj", "reset")

    def __init__(self, name: str, cfg: Any, fn: Callable, reset: Callable | None, obj: Any,
                 components: dict[str, int] | None) -> None:
        self.name, self.cfg, self.fn, self.reset, self.obj = name, cfg, fn, reset, obj
        self.components = components

    def columns(self, owner: str) -> list[str]:
        """Component names of a term whose components are one column each (rewards,
        terminations); a single-output term is one column named after the term."""
        if self.components is None:
            return [self.name]
        wide = [c for c, w in self.components.items() if w != 1]
        if wide:
            raise ValueError(f"{owner} term {self.name!r}: components {wide} are wider than one column")
        return list(self.components)


def _components(declared: Any, owner: str) -> dict[str, int] | None:
    if declared is None:
        return None
    if isinstance(declared, Mapping):
        out = {str(k): int(v) for k, v in declared.items()}
    elif isinstance(declared, (tuple, list)) and all(isinstance(c, str) for c in declared):
        out = dict.fromkeys(declared, 1)
    else:
        raise ValueError(f"{owner}: components must be a tuple of names or a name -> width mapping, "
                         f"got {declared!r}")
    if not out or len(out) != len(declared) or any(w < 1 for w in out.values()):
        raise ValueError(f"{owner}: components must be unique names with widths >= 1, got {declared!r}")
    return out


def build_term(kind: str, name: str, cfg: Any, env: Any) -> Term:
    """Build the term of ``cfg`` (config section ``kind``, key ``name``). Any error names
    the term."""
    owner = f"{kind} term {name!r}"
    func = cfg.func
    try:
        if inspect.isclass(func):
            obj = func(cfg, env)
            return Term(name, cfg, obj, getattr(obj, "reset", None), obj,
                        _components(getattr(obj, "components", None), owner))
        reqs = getattr(func, "requirements", None)
        if reqs:
            env.robot.require(owner, *reqs)
        signature = inspect.signature(func).parameters
        unknown = set(cfg.params) - set(signature)
        if unknown and not any(p.kind is p.VAR_KEYWORD for p in signature.values()):
            raise ValueError(f"unknown params {sorted(unknown)}; {func.__name__} takes "
                             f"{[p for p in signature if p not in ('env', 'txn')]}")
        fn = functools.partial(func, **cfg.params) if cfg.params else func
        return Term(name, cfg, fn, None, None, _components(getattr(func, "components", None), owner))
    except MissingCapability as exc:
        msg = str(exc)
        raise MissingCapability(msg if msg.startswith(owner) else f"{owner}: {msg}") from None
    except (ValueError, KeyError, TypeError, ArithmeticError) as exc:  # e.g. a param of 0 a term divides by
        msg = str(exc) if isinstance(exc, ValueError | KeyError | TypeError) else f"{type(exc).__name__}: {exc}"
        raise ValueError(msg if msg.startswith(owner) else f"{owner}: {msg}") from None


def reset_terms(terms: list[Term], done) -> None:
    """Call ``reset(done)`` of every term that has one."""
    for t in terms:
        if t.reset is not None:
            t.reset(done)


def any_column(fired: torch.Tensor) -> torch.Tensor:
    """Rows of an (N, K) bool matrix where any column is set. With one column that column is
    the answer: a view of ``fired``, no kernel; only for masks read within the step that
    made ``fired`` (a view changes when ``fired`` is written again)."""
    return fired[:, 0] if fired.shape[1] == 1 else fired.any(dim=1)

