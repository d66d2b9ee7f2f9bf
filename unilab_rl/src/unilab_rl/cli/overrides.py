"""``key=value`` command-line overrides, routed by namespace: ``algo.``, ``runner.``, ``env.``.

A prefixed key goes to its namespace, which must have that setting (``algo.batch_size``,
``runner.log_every``, ``env.rewards.velocity.weights.alive``). A bare key is taken only where
it names exactly one setting across the namespaces: ``cuda_graph`` is both the learner's and
the env's, so it is refused naming ``algo.cuda_graph`` and ``env.cuda_graph``. A key no
namespace has is refused naming the nearest one that is, under its namespace (``batch_sise``:
``algo.batch_size``). The env's settings are the dotted keys of the task's config; for a task
unilab does not register (an injected factory's) they are not known here, so the env takes
what no other namespace names and its factory validates it. Values stay strings; pydantic
and the env coerce them ("3e-4" -> float).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from pydantic import BaseModel, ValidationError


class OverrideError(ValueError):
    pass


@dataclass(frozen=True)
class Namespace:
    """Where overrides of one kind go: ``name.<key>`` names it, and a bare key reaches it (when
    ``bare``) if it names one of its settings and no other namespace's."""

    name: str  # the prefix: algo, runner, env, eval
    what: str  # how a message calls it: "algorithm", "runner", "env"
    keys: frozenset[str] | None  # its settings; None: not known here (its consumer validates them)
    takes: Callable[[str], bool] | None = None  # keys it takes beyond ``keys`` (free-form entries)
    bare: bool = True

    def names(self, key: str) -> bool:
        return self.keys is None or key in self.keys or (self.takes is not None and self.takes(key))


def fields_namespace(name: str, what: str, config: type[BaseModel]) -> Namespace:
    return Namespace(name, what, frozenset(config.model_fields))


def env_namespace(task: str) -> Namespace:
    """The env's settings: the dotted keys of ``task``'s config, or unknown (the factory checks
    them) for a task unilab does not register."""
    from unilab.config_overrides import names_a_setting, setting_keys
    from unilab.registry import is_task, task_config

    if not is_task(task):
        return Namespace("env", "env", None)
    keys = setting_keys(task_config(task))
    return Namespace("env", "env", keys, lambda key: names_a_setting(keys, key))


@dataclass
class SplitOverrides:
    algo: dict[str, str] = field(default_factory=dict)
    runner: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)


def parse_token(token: str) -> tuple[str, str]:
    key, sep, value = token.partition("=")
    if not sep or not key.strip():
        raise OverrideError(f"override {token!r}: expected key=value")
    return key.strip(), value.strip()


def parse_tokens(tokens: Iterable[str]) -> dict[str, str]:
    return dict(parse_token(token) for token in tokens)


def route(tokens: Iterable[str], namespaces: list[Namespace],
          flags: Iterable[str] = ()) -> dict[str, dict[str, str]]:
    """Each token's key and value under the namespace it names (see the module docstring), in
    order, a later token of the same setting winning; an OverrideError names a key that is
    ambiguous, misplaced or unknown, and a bare key that is the name of one of the command's
    ``flags`` (``--num-envs``: ``num_envs=...``) and no setting, naming the flag."""
    flag_of = {flag.lstrip("-").replace("-", "_"): flag for flag in flags}
    by_name = {namespace.name: namespace for namespace in namespaces}
    routed: dict[str, dict[str, str]] = {namespace.name: {} for namespace in namespaces}
    for token in tokens:
        key, value = parse_token(token)
        prefix, dot, rest = key.partition(".")
        if dot and prefix in by_name:
            namespace = by_name[prefix]
            if not rest or not namespace.names(rest):
                raise OverrideError(f"override {key!r}: unknown {namespace.what} key {rest!r}"
                                    + _hint(rest, namespaces, namespace))
        else:
            if key in flag_of and not any(n.keys is not None and n.names(key) for n in namespaces):
                raise OverrideError(f"override {token!r}: {key} is the {flag_of[key]} flag, not an override; "
                                    f"write {flag_of[key]} {value}")
            namespace, rest = _owner(key, namespaces), key
        routed[namespace.name][rest] = value
    return routed


def _owner(key: str, namespaces: list[Namespace]) -> Namespace:
    """The one namespace a bare key names, else the one whose keys are not known here."""
    known = [n for n in namespaces if n.bare and n.keys is not None and n.names(key)]
    if len(known) > 1:
        named = " and ".join(f"{n.name}.{key} (the {n.what}'s)" for n in known)
        raise OverrideError(f"override {key!r}: ambiguous, it is both {named}; write the one you mean")
    if known:
        return known[0]
    unknown = [n for n in namespaces if n.bare and n.keys is None]
    if unknown:
        return unknown[0]
    whats = [n.what for n in namespaces if n.bare]
    listed = ", ".join(whats[:-1]) + f" or {whats[-1]}" if len(whats) > 1 else whats[0]
    raise OverrideError(f"override {key!r}: unknown key, not a setting of the {listed}" + _hint(key, namespaces))


def _hint(key: str, namespaces: list[Namespace], asked: Namespace | None = None) -> str:
    """Where ``key`` is a setting (a misplaced one), else the nearest setting as deep as it and
    the keys where it stopped matching (or, with neither, each namespace's top-level keys)."""
    known = [n for n in namespaces if n.keys is not None]
    elsewhere = [f"{n.name}.{key}" for n in known if n is not asked and n.names(key)]
    if elsewhere:
        return f"; it is {' or '.join(elsewhere)}"
    scope = [asked] if asked is not None and asked.keys is not None else known
    depth = key.count(".")
    candidates = {k: n for n in reversed(scope) for k in n.keys if k.count(".") == depth}  # the first wins a name
    near = difflib.get_close_matches(key, list(candidates), n=1)
    hint = f"; did you mean {candidates[near[0]].name}.{near[0]}?" if near else ""
    parents = [(n, parent) for n in scope if (parent := _deepest_parent(key, n))]
    if parents:
        return hint + "".join(f"; valid keys under {n.name}.{parent}: {', '.join(_children(n, parent))}"
                              for n, parent in parents)
    if near:
        return hint
    return hint + "".join(f"; valid {n.what} keys: {', '.join(_children(n, ''))}" for n in scope)


def _deepest_parent(key: str, namespace: Namespace) -> str:
    """The longest dotted prefix of ``key`` that ``namespace`` has ("" if none)."""
    assert namespace.keys is not None
    parts = key.split(".")
    return next((p for d in range(len(parts) - 1, 0, -1) if (p := ".".join(parts[:d])) in namespace.keys), "")


def _children(namespace: Namespace, parent: str) -> list[str]:
    assert namespace.keys is not None
    start = f"{parent}." if parent else ""
    return sorted({k[len(start):].split(".")[0] for k in namespace.keys if k.startswith(start) and k != parent})


def split_overrides(tokens: list[str], algo_config: type[BaseModel], runner_config: type[BaseModel],
                    env: Namespace | None = None, flags: Iterable[str] = ()) -> SplitOverrides:
    """A training command's overrides for the algorithm, the runner and the env (``env``: its
    settings, e.g. ``env_namespace(task)``; None: not known here, the factory checks them);
    ``flags``: the command's flags, which a bare key may not name (see ``route``)."""
    routed = route(tokens, [fields_namespace("algo", "algorithm", algo_config),
                            fields_namespace("runner", "runner", runner_config),
                            env or Namespace("env", "env", None)], flags)
    return SplitOverrides(routed["algo"], routed["runner"], routed["env"])


def validated(model: type[BaseModel], base: dict[str, object], updates: dict[str, str], what: str) -> BaseModel:
    """``model`` built from ``base`` updated with ``updates``; a clear error names bad values."""
    try:
        return model.model_validate({**base, **updates})
    except ValidationError as error:
        problems = "; ".join(
            # A check across fields (a model validator) has no location: its message names them.
            f"{'.'.join(str(p) for p in e['loc'])}={e.get('input')!r}: {e['msg']}" if e["loc"] else e["msg"]
            for e in error.errors())
        raise OverrideError(f"bad {what} override: {problems}") from None
