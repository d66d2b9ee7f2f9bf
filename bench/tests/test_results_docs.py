"""The checkout's own docs against its results store: the generated sections read what the store
gives, and every performance figure typed by hand in README.md and docs/*.md has a record."""

from __future__ import annotations

import re
import shlex

import pytest
from unilab_bench import collector, matrix
from unilab_bench.results import claims, render, store
from unilab_bench.results import cli as results_cli


def test_the_store_reads_and_every_record_is_well_formed():
    records = store.read(store.STORE)
    assert records, "results/records.jsonl holds no record"
    assert {r["kind"] for r in records} >= {"training", "env", "collector"}


def test_the_generated_sections_are_up_to_date():
    stale = render.stale(store.ROOT, store.read(store.STORE))
    assert not stale, f"stale: {', '.join(str(p) for p in stale)}; run `unilab-bench results render`"


def test_every_hand_typed_figure_has_a_record():
    problems = claims.unbacked(store.ROOT, store.read(store.STORE))
    assert not problems, "\n".join(problems)


def bench_commands() -> list[tuple[str, list[str]]]:
    """(where, argv) of every ``unilab-bench results|collector|matrix`` command in the docs' code blocks."""
    found = []
    for path in claims.doc_paths(store.ROOT):
        for block in re.findall(r"```(?:bash|sh)?\n(.*?)```", path.read_text(), flags=re.S):
            for line in re.sub(r"\\\n\s*", " ", block).splitlines():
                line = line.split(" #")[0].strip().replace(".venv/bin/", "")
                if not line.startswith("unilab-bench "):
                    continue
                argv = shlex.split(line)
                if argv[1] in ("results", "collector", "matrix"):
                    found.append((path.name, argv[1:]))
    return found


BENCH_COMMANDS = bench_commands()


def test_the_docs_show_the_results_commands():
    shown = {tuple(argv[:2]) for _, argv in BENCH_COMMANDS}
    assert {("results", "add-run"), ("results", "render"), ("results", "check")} <= shown


@pytest.mark.parametrize(("where", "argv"), BENCH_COMMANDS, ids=[f"{w}:{' '.join(a)[:50]}" for w, a in BENCH_COMMANDS])
def test_every_bench_command_in_the_docs_parses(where, argv):
    if argv[0] == "results":
        results_cli.build_parser().parse_args(argv[1:])
    elif argv[0] == "matrix":
        matrix.build_parser().parse_args(argv[1:])
    else:
        collector.build_parser().parse_args(argv)
