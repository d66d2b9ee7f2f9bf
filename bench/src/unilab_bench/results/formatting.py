"""How the results tables write a figure: rates, ratios, spans, dates, entries, table rows."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from unilab_bench.results.store import short_device


def rate(value: float | None) -> str:
    """Env-steps/s in thousands: 421400 -> 421k, 45300 -> 45k, 5230 -> 5.2k."""
    if value is None:
        return "-"
    k = value / 1000
    return f"{k:.1f}k" if k < 10 else f"{k:.0f}k"


def ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}x"


def span(values: list[float | None], fmt: Callable[[float], str]) -> str:
    """One figure, or the span of several with their unit once: 421k, 244-250k, 4.9-5.1 s."""
    values = [v for v in values if v is not None]
    if not values:
        return "-"
    low, high = fmt(min(values)), fmt(max(values))
    if low == high:
        return low
    unit = re.search(r"[^\d.]*$", high)[0]
    return f"{low.removesuffix(unit)}-{high}"


def rate_span(values: list[float | None]) -> str:
    return span(values, rate)


def number_span(values: list[float | None], fmt: str, unit: str) -> str:
    return span(values, lambda v: f"{fmt.format(v)} {unit}")


def budget(subject: dict[str, Any]) -> str:
    """The training budget as the run was given it: ``90 s``, ``3 min``, ``1,000,000 env steps``."""
    minutes = subject.get("minutes")
    if minutes is not None:
        return f"{minutes * 60:g} s" if minutes * 60 < 120 else f"{minutes:g} min"
    steps = subject.get("steps")
    return f"{steps:,} env steps" if steps else "-"


def millions(values: list[float]) -> str:
    return number_span([v / 1e6 for v in values if v is not None], "{:.1f}", "M").replace(" M", "M")


def seeds_text(seeds: list[int]) -> str:
    """0-7 for 0..7, 0, 2, 5 otherwise."""
    seeds = sorted(s for s in seeds if s is not None)
    if not seeds:
        return "-"
    if seeds == list(range(seeds[0], seeds[-1] + 1)) and len(seeds) > 2:
        return f"{seeds[0]}-{seeds[-1]}"
    return ", ".join(map(str, seeds))


def device(record: dict[str, Any]) -> str:
    return short_device(record.get("gpu"), record.get("cpu"))


def when(records: list[dict[str, Any]]) -> str:
    """Dates and commits of a group: 2026-12-04 (8fc9d75, 2acb72e)."""
    dates = sorted({r["date"] for r in records})
    commits = sorted({commit_text(r["commit"]) for r in records if r.get("commit")})
    date = dates[0] if len(dates) == 1 else f"{dates[0]} to {dates[-1]}"
    return f"{date} ({', '.join(commits)})" if commits else date


def commit_text(commit: str) -> str:
    """A commit by its first 7 digits; a tree recorded as a commit plus a patch as recorded."""
    return commit if "+" in commit else commit[:7]


def algo_name(algo: str | None) -> str:
    return {"fastsac": "FastSAC", "flashsac": "FlashSAC", "ppo": "PPO"}.get(algo or "", algo or "-")


def entry_label(entry: str) -> str:
    head, *overrides = entry.split(" ")
    preset, _, algo = head.partition("/")
    name = algo_name(algo)
    extra = f" + {' '.join(f'`{o}`' for o in overrides)}" if overrides else ""
    return f"{name} `{preset}`{extra}"


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    aligned = ["---:" if h.startswith("#") else "---" for h in header]
    lines = ["| " + " | ".join(h.lstrip("#") for h in header) + " |", "|" + "|".join(aligned) + "|"]
    return lines + ["| " + " | ".join(row) + " |" for row in rows]


def median_of(stats: dict[str, float] | None) -> float | None:
    return None if not stats else stats.get("median")
