"""The checkout's own docs against its results store: the generated sections read what the store
gives, and every performance figure typed by hand in README.md and docs/*.md has a record."""

from __future__ import annotations

from unilab_bench.results import claims, render, store


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
