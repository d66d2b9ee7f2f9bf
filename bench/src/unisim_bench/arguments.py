"""argparse types for benchmark flags: a bad number is refused by the parser, naming the flag,
before anything is built (an env count of 0 reached MuJoCo's rollout and crashed the process)."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable


def int_at_least(minimum: int) -> Callable[[str], int]:
    """An argparse ``type``: an integer >= ``minimum``."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, got {value}")
        return value

    return parse


def int_list_at_least(minimum: int) -> Callable[[str], list[int]]:
    """An argparse ``type``: comma-separated integers, each >= ``minimum`` (an empty text is
    an empty list)."""
    single = int_at_least(minimum)

    def parse(text: str) -> list[int]:
        return [single(part.strip()) for part in text.split(",") if part.strip()]

    return parse


def positive_seconds(text: str) -> float:
    """An argparse ``type``: a finite number of seconds > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a finite number > 0, got {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a finite number > 0, got {value}")
    return value
