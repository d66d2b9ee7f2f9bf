"""``unilab-bench collector --record STORE`` appends the collector's compact record."""

from __future__ import annotations

import sys

from test_results_store import _stats, collector_full
from unilab_bench.results import records, store


def test_unilab_bench_collector_record_appends_the_compact_record(tmp_path, monkeypatch):
    from unilab_bench import collector as collector_bench

    full = collector_full() | {"learning_cost_ratio": 0.61, "overlapped_learning_cost_ratio": 0.70,
                               "env_steps_per_s_env_alone_replaying_actions": _stats(420000.0),
                               "env_steps_per_s_with_learning_overlapped_by_env_priority": {"-5": _stats(285629.4)},
                               "phase_ms_with_learning": {"policy_ms": 0.1}}
    full["of_env_alone_replaying_actions"] = {m: _stats(0.6) for m in records.MODES}
    monkeypatch.setattr(collector_bench, "bench_collector", lambda args, factory: full)
    path = tmp_path / "records.jsonl"
    argv = ["collector", "--algo", "flashsac", "--record", str(path)]
    monkeypatch.setattr(sys, "argv", ["/venv/bin/unilab-bench", *argv])
    assert collector_bench.main(argv, factory=lambda *a, **k: None) == 0
    [r] = store.read(path)
    assert r["kind"] == "collector" and r["figures"]["of_env_alone"]["with_learning_overlapped"] == 0.69616557
    assert r["command"] == f"unilab-bench collector --algo flashsac --record {path}"
