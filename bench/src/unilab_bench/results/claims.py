"""The performance figures the docs type by hand, and whether the store backs each.

A figure is what these patterns find: env-steps/s in thousands (``421k``, ``244-250k``), a ratio
to three places (``0.946x``), seeds or runs counted (``7 of 8 seeds``), and a time to a result
(``walks after 90 s``, ``passes ... in 3 minutes``). Outside the generated sections of README.md
and docs/*.md, each must be one the store renders: a figure of the generated tables, or of one
record, printed as the tables print it. Anything else is a claim without a record.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from unilab_bench.results import formatting, render

THOUSANDS = r"\d+(?:\.\d+)?(?:-\d+(?:\.\d+)?)?k\b"
PATTERNS = {
    "env-steps/s": re.compile(r"(?<![\w.-])" + THOUSANDS),
    "ratio": re.compile(r"(?<![\w.-])\d\.\d{2,3}(?:-\d\.\d{2,3})?x\b"),
    "count": re.compile(r"\b\d+ of \d+ (?:seeds|runs|seed-runs)\b"),
    "time to a result": re.compile(
        r"\b(?:walk\w*|pass\w*|track\w*|learn\w*)\b[^.\n]{0,60}?\b(?:in|after|within|at)\s+"
        r"(\d+(?:\.\d+)?\s?(?:s|seconds|min|minutes))\b"),
}
DOCS = ("README.md", "docs/*.md")


def normalized(kind: str, text: str) -> str:
    text = text.replace("\u2013", "-")
    if kind == "time to a result":
        number, unit = re.match(r"(\d+(?:\.\d+)?)\s?(\w+)", text).groups()
        return f"{number} {'s' if unit.startswith('s') else 'min'}"
    return text


def figures_in(text: str) -> list[tuple[str, str, int]]:
    """(kind, figure, line) of every figure the patterns find in ``text``."""
    found = []
    for kind, pattern in PATTERNS.items():
        for match in pattern.finditer(text):
            figure = match[1] if match.groups() else match[0]
            found.append((kind, normalized(kind, figure), text.count("\n", 0, match.start()) + 1))
    return found


def outside_sections(text: str) -> str:
    """``text`` with its generated sections blanked (line numbers kept)."""
    for start, end in reversed(render.sections(text)):
        text = text[:start] + re.sub(r"[^\n]", " ", text[start:end]) + text[end:]
    return text


def record_texts(record: dict[str, Any]) -> list[str]:
    """One record's figures printed as the tables print them."""
    f, s = record["figures"], record["subject"]
    texts = []
    for value in f.values():
        if isinstance(value, dict) and {"min", "median", "max"} <= set(value):
            texts += [formatting.rate(value[k]) for k in ("min", "median", "max")]
            texts.append(formatting.rate_span([value["min"], value["max"]]))
    for key in ("ratio_to_raw", "ratio_to_replay", "compare_to_replay", "env_to_reference"):
        if f.get(key) is not None:
            texts.append(formatting.ratio(f[key]))
    for key in ("of_env_alone", "of_env_alone_replaying_actions"):
        texts += [formatting.ratio(v) for v in (f.get(key) or {}).values()]
    if f.get("env_steps_per_s_learning") is not None:
        texts.append(formatting.rate(f["env_steps_per_s_learning"]))
    texts.append(formatting.budget(s))
    for judged in (f.get("eval"), f.get("eval_latest_actor")):
        if judged and judged.get("time_to_pass_s") is not None:
            texts.append(f"{judged['time_to_pass_s']:.0f} s")
    for case in (f.get("cases") or {}).values():  # matrix records
        for side in ("head", "base"):
            for key, value in (case.get(side) or {}).items() if isinstance(case, dict) else ():
                texts.append(formatting.rate(value) if "steps_per_s" in key else formatting.ratio(value))
    return texts


def backed(records: list[dict[str, Any]], readme: str | None = None) -> set[tuple[str, str]]:
    """(kind, figure) of everything the store renders: its tables and each record's own figures."""
    texts = [render.render_results(records), render.render_readme_table(records)]
    for record in records:
        texts.append(" ".join(record_texts(record)))
    known = set()
    for text in texts:
        known |= {(kind, figure) for kind, figure, _ in figures_in(text)}
        for token in re.findall(r"\d+(?:\.\d+)?\s?(?:s|min)\b", text):  # budgets, times to a pass
            known.add(("time to a result", normalized("time to a result", token)))
    return known


def unbacked(root: Path, records: list[dict[str, Any]], paths: list[Path] | None = None) -> list[str]:
    """``path:line: kind figure`` for every hand-typed figure no record backs."""
    known = backed(records)
    paths = paths if paths is not None else doc_paths(root)
    problems = []
    for path in paths:
        text = outside_sections(path.read_text())
        for kind, figure, line in figures_in(text):
            if (kind, figure) not in known:
                where = path.relative_to(root) if path.is_relative_to(root) else path
                problems.append(f"{where}:{line}: {kind} {figure!r} is in no record of the store")
    return problems


def doc_paths(root: Path) -> list[Path]:
    paths = []
    for pattern in DOCS:
        paths += sorted(root.glob(pattern))
    return paths
