"""unilab-bench reaches matrix and compare, and returns compare's exit code (0 pass, 1 allowance
used, 2 blocked, 3 unreadable records) for CI to act on."""

from __future__ import annotations

import json

from unilab_bench import cli as bench


def _record(path, throughput):
    samples = [{"env_steps_per_s_streamed": t, "reset_done_ms": 1.0, "host_syncs_per_env_step": 0.0}
               for t in throughput]
    case = {"status": "ok", "smoke": False, "samples": samples}
    path.write_text(json.dumps({"benchmark": "unilab_bench.matrix",
                                "cases": {"flashsac/g1_motion_tracking/mjwarp": {"head": case}}}))
    return str(path)


def test_compare_subcommand_exit_codes(tmp_path, capsys):
    base = _record(tmp_path / "base.json", [1000.0, 1000.0, 1000.0])
    same = _record(tmp_path / "same.json", [1000.0, 1000.0, 1000.0])
    slow = _record(tmp_path / "slow.json", [700.0, 700.0, 700.0])  # -30% on tracking
    assert bench.main(["compare", base, same]) == 0
    assert bench.main(["compare", base, slow]) == 2
    assert "blocked" in capsys.readouterr().out
    assert bench.main(["compare", str(tmp_path / "absent.json"), same]) == 3


def test_matrix_subcommand_refuses_fewer_than_three_rounds(capsys):
    try:
        bench.main(["matrix", "--rounds", "2"])
    except SystemExit as stop:
        assert stop.code == 2
    assert "at least 3" in capsys.readouterr().err
