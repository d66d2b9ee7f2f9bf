"""The training sink: what rank 0 writes to the JSON-lines log and the learning curve."""

import json

import pytest
from unilab_rl.cli.metrics_sink import TrainingSink


@pytest.mark.parametrize("world_size", [1, 2])
def test_a_data_parallel_run_also_logs_the_rate_of_all_ranks(tmp_path, world_size):
    sink = TrainingSink(tmp_path, tmp_path / "curve.json", {"world_size": world_size}, tensorboard=False)
    sink.write(4096, 1.5, {"perf/env_steps_per_s": 1000.0})
    sink.close()
    record = json.loads((tmp_path / "metrics.jsonl").read_text())
    point = json.loads((tmp_path / "curve.json").read_text())["points"][0]
    assert record["perf/env_steps_per_s"] == point["env_steps_per_s"] == 1000.0
    if world_size == 1:
        assert "perf/env_steps_per_s_all_ranks" not in record and "env_steps_per_s_all_ranks" not in point
    else:
        assert record["perf/env_steps_per_s_all_ranks"] == point["env_steps_per_s_all_ranks"] == 2000.0
