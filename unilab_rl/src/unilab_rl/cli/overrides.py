"""``key=value`` command-line overrides, split between the algorithm, the runner and the env.

Routing: a key that names a field of the algorithm's config (optionally written
``algo.<field>``) goes to the algorithm config; a field of RunnerConfig (``runner.<field>``)
to the runner; ``env.<key>`` and everything else to the env factory, which validates it and
lists the valid keys itself. The ``env.`` prefix reaches an env setting whose name an
algorithm field also has (``env.cuda_graph=true`` graphs the env step; ``cuda_graph`` alone is
the learner's). Values stay strings; pydantic coerces them ("3e-4" -> float).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import BaseModel, ValidationError


class OverrideError(ValueError):
    pass


@dataclass
class SplitOverrides:
    algo: dict[str, str] = field(default_factory=dict)
    runner: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)


def parse_tokens(tokens: list[str]) -> dict[str, str]:
    values: dict[str, str] = {}
    for token in tokens:
        key, sep, value = token.partition("=")
        if not sep or not key.strip():
            raise OverrideError(f"override {token!r}: expected key=value")
        values[key.strip()] = value.strip()
    return values


def split_overrides(tokens: list[str], algo_config: type[BaseModel], runner_config: type[BaseModel]) -> SplitOverrides:
    split = SplitOverrides()
    for key, value in parse_tokens(tokens).items():
        prefix, _, rest = key.partition(".")
        if prefix == "algo":
            if rest not in algo_config.model_fields:
                raise OverrideError(f"override {key!r}: unknown algorithm key {rest!r}; "
                                    f"valid: {', '.join(sorted(algo_config.model_fields))}")
            split.algo[rest] = value
        elif prefix == "env" and rest:
            split.env[rest] = value
        elif prefix == "runner":
            if rest not in runner_config.model_fields:
                raise OverrideError(f"override {key!r}: unknown runner key {rest!r}; "
                                    f"valid: {', '.join(sorted(runner_config.model_fields))}")
            split.runner[rest] = value
        elif key in algo_config.model_fields:
            split.algo[key] = value
        elif key in runner_config.model_fields:
            split.runner[key] = value
        else:
            split.env[key] = value
    return split


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
