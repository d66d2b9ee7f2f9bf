"""Turning a term config into a callable ``term(env)``, with construction-time checks."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from unisim import Feature

from unilab.robot import MissingCapability


def requires(*features: Feature, model_fields: tuple[str, ...] = (), sensor_kinds: tuple[str, ...] = ()):
    """Declare the capabilities a function term needs; checked when the manager is built."""
    def mark(func):
        func.requirements = (tuple(features), tuple(model_fields), tuple(sensor_kinds))
        return func
    return mark


class Term:
    """A built term: ``fn(env)`` plus the optional ``reset(done)`` of a class term, where
    ``done`` is the (N,) bool mask of rows starting a new episode (masks, not row lists,
    keep the reset free of host syncs)."""

    __slots__ = ("cfg", "fn", "name", "obj", "reset")

    def __init__(self, name: str, cfg: Any, fn: Callable, reset: Callable | None, obj: Any) -> None:
        self.name, self.cfg, self.fn, self.reset, self.obj = name, cfg, fn, reset, obj


def build_term(kind: str, name: str, cfg: Any, env: Any) -> Term:
    """Class terms are instantiated with ``(cfg, env)`` (resolving names once); function
    terms get their params bound once. Any error names the term."""
    owner = f"{kind} term {name!r}"
    func = cfg.func
    try:
        if inspect.isclass(func):
            obj = func(cfg, env)
            reset = getattr(obj, "reset", None)
            return Term(name, cfg, obj, reset, obj)
        reqs = getattr(func, "requirements", None)
        if reqs:
            env.robot.require(owner, *reqs)
        unknown = set(cfg.params) - set(inspect.signature(func).parameters)
        if unknown and not any(p.kind is p.VAR_KEYWORD for p in inspect.signature(func).parameters.values()):
            raise ValueError(f"unknown params {sorted(unknown)}; {func.__name__} takes "
                             f"{[p for p in inspect.signature(func).parameters if p != 'env']}")
        fn = functools.partial(func, **cfg.params) if cfg.params else func
        return Term(name, cfg, fn, None, None)
    except MissingCapability as exc:
        msg = str(exc)
        raise MissingCapability(msg if msg.startswith(owner) else f"{owner}: {msg}") from None
    except (ValueError, KeyError, TypeError) as exc:
        msg = str(exc)
        raise ValueError(msg if msg.startswith(owner) else f"{owner}: {msg}") from None
