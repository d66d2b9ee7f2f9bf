"""The results store: one compact record per measurement in ``results/records.jsonl``, and the
docs' results tables generated from it.

``store`` appends and reads records, ``records`` makes them from what the benchmarks and a
finished training run write, ``render`` writes ``docs/results.md`` and the README's results
table, ``claims`` finds the figures the docs type by hand and whether a record backs each, and
``cli`` is ``unilab-bench results``.
"""
