"""Dotted overrides of an env config: ``rewards.velocity.weights.alive=2`` addresses any field.

Unknown keys are refused with the valid ones listed, keys of earlier configurations with what
replaced them (``removed_keys.toml``), and every value is type-checked by pydantic: a term's
number refuses a bool, since ``TypeAdapter(float)`` would read ``true`` as 1.0.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, TypeAdapter, ValidationError

from unilab.config import EnvCfg


def parse_overrides(overrides: Mapping[str, Any] | Iterable[str] | str | None) -> list[tuple[str, Any]]:
    if overrides is None:
        return []
    if isinstance(overrides, str):
        overrides = overrides.split()
    if isinstance(overrides, Mapping):  # string values (e.g. from a CLI) parse like "k=v" items
        return [(k, _parse_value(v) if isinstance(v, str) else v) for k, v in overrides.items()]
    if not isinstance(overrides, Iterable):
        raise ValueError(f"overrides: expected a dict, 'key=value' strings or one such string, got "
                         f"{type(overrides).__name__}")
    items = []
    for item in overrides:
        if not isinstance(item, str) or "=" not in item:
            raise ValueError(f"overrides: expected 'key=value' strings, got {item!r}")
        key, raw = item.split("=", 1)
        items.append((key.strip(), _parse_value(raw.strip())))
    return items


def _parse_value(raw: str) -> Any:
    low = raw.lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("none", "null"):
        return None
    try:
        return ast.literal_eval(raw)
    except (ValueError, SyntaxError):
        return raw  # a plain string; pydantic decides whether it fits


def _removed_keys() -> dict[str, str]:
    """Keys of earlier configurations that no longer exist, with what replaced them
    (``removed_keys.toml``, data beside this module)."""
    import tomllib
    from pathlib import Path

    return tomllib.loads((Path(__file__).with_name("removed_keys.toml")).read_text())["keys"]


REMOVED_KEYS = _removed_keys()


def apply_overrides(cfg: EnvCfg, overrides: Mapping[str, Any] | Iterable[str] | str | None) -> EnvCfg:
    """Return a validated copy of ``cfg`` with dotted overrides applied."""
    cfg = cfg.model_copy(deep=True)
    for key, value in parse_overrides(overrides):
        removed = REMOVED_KEYS.get(key.removeprefix("env."))
        if removed is not None:
            raise ValueError(f"override {key!r}: removed; {removed} (see docs/migration.md)")
        parts = key.split(".")
        node: Any = cfg
        for depth, part in enumerate(parts[:-1]):
            node = _child(node, part, ".".join(parts[:depth + 1]))
        if parts[:-1] == ["backend_options"]:  # adapter options are free-form: new keys allowed
            node[parts[-1]] = value
            continue
        _assign(node, parts[-1], value, key)
    try:
        return type(cfg).model_validate(cfg.model_dump())
    except ValidationError as exc:  # a constraint across fields, or in a term's params
        given = ", ".join(f"{k}={v!r}" for k, v in parse_overrides(overrides))
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise ValueError(f"overrides {given}: {problems}") from None


def setting_keys(cfg: EnvCfg) -> frozenset[str]:
    """Every dotted key an override may name in ``cfg``: each field of its models and each entry
    of its dicts, at every depth (``rewards``, ``rewards.velocity``, ``rewards.velocity.weights.alive``).
    What ``names_a_setting`` takes besides: ``backend_options`` entries and removed keys."""
    keys: set[str] = set()

    def walk(node: Any, path: str) -> None:
        children = ({name: getattr(node, name) for name in type(node).model_fields} if isinstance(node, BaseModel)
                    else node if isinstance(node, dict) else {})
        for name, child in children.items():
            if not isinstance(name, str) or "." in name:
                continue  # a regex key (".*_knee"): no dotted key can name it
            key = f"{path}{name}"
            keys.add(key)
            walk(child, f"{key}.")

    walk(cfg, "")
    return frozenset(keys)


def names_a_setting(keys: frozenset[str], key: str) -> bool:
    """Whether an override of ``key`` reaches a config with ``setting_keys`` ``keys``: one of
    them, a ``backend_options`` entry (free-form adapter options) or a removed key (refused by
    ``apply_overrides`` with what replaced it)."""
    parent, _, _ = key.rpartition(".")
    return key in keys or parent == "backend_options" or key in REMOVED_KEYS


def overrides_without_target(cfg: EnvCfg, keys: Iterable[str]) -> list[str]:
    """The dotted keys that name nothing in ``cfg``: a parent path it lacks (a training run's
    ``curriculum.command_ranges.params.stages`` on a play variant that has no curriculum), or
    an entry a dict of it lacks (a term param a play variant removed). ``backend_options``
    takes new keys, so its entries always have a target; a missing field of a config model is
    left for ``apply_overrides`` to report."""
    missing = []
    for key in keys:
        parts, node = key.split("."), cfg
        try:  # the walk apply_overrides makes
            for depth, part in enumerate(parts[:-1]):
                node = _child(node, part, ".".join(parts[:depth + 1]))
        except ValueError:
            missing.append(key)
            continue
        if isinstance(node, dict) and parts[:-1] != ["backend_options"] and parts[-1] not in node:
            missing.append(key)
    return missing


def _valid_keys(node: Any) -> list[str]:
    return sorted(type(node).model_fields) if isinstance(node, BaseModel) else sorted(node)


def _child(node: Any, part: str, path: str) -> Any:
    if isinstance(node, BaseModel) and part in type(node).model_fields:
        return getattr(node, part)
    if isinstance(node, dict) and part in node:
        return node[part]
    if not isinstance(node, (BaseModel, dict)):
        raise ValueError(f"override {path!r}: {type(node).__name__} has no sub-keys")  # noqa: TRY004
    raise ValueError(f"override {path!r}: unknown key {part!r}; valid keys: {_valid_keys(node)}")


def _assign(node: Any, part: str, value: Any, key: str) -> None:
    if isinstance(node, BaseModel):
        if part not in type(node).model_fields:
            raise ValueError(f"override {key!r}: unknown key {part!r}; valid keys: {_valid_keys(node)}")
        try:
            setattr(node, part, value)
        except ValidationError as exc:
            raise ValueError(f"override {key!r}: bad value {value!r}: {exc.errors()[0]['msg']}") from None
        return
    if isinstance(node, dict):
        if part not in node:
            raise ValueError(f"override {key!r}: unknown key {part!r}; valid keys: {_valid_keys(node)}")
        old = node[part]
        if value is None and isinstance(old, BaseModel):
            del node[part]  # `rewards.alive=None` drops a term
            return
        if old is not None and not isinstance(old, BaseModel):
            if isinstance(value, bool) and not isinstance(old, bool) and isinstance(old, int | float):
                # TypeAdapter(float) reads True as 1.0: a term's weight of "true" is a typo, not 1
                raise ValueError(f"override {key!r}: bad value {value!r}: expected {type(old).__name__}")
            try:
                value = TypeAdapter(type(old)).validate_python(value)
            except ValidationError as exc:
                raise ValueError(f"override {key!r}: bad value {value!r}: expected {type(old).__name__} "
                                 f"({exc.errors()[0]['msg']})") from None
        elif isinstance(old, BaseModel):
            raise ValueError(f"override {key!r}: set the fields of {part!r} one by one (or None to drop it)")
        node[part] = value
        return
    raise ValueError(f"override {key!r}: {type(node).__name__} has no sub-keys")
