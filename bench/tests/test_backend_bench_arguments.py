"""The benchmarks' argparse types: bad numbers are refused by the parser, naming the flag,
before a model is loaded or a rollout starts."""

import argparse

import pytest
from unisim_bench import mujoco_host
from unisim_bench.arguments import int_at_least, int_list_at_least, positive_seconds


def test_integer_flags_refuse_values_below_their_minimum_and_non_integers():
    assert int_at_least(1)("3") == 3
    assert int_at_least(0)("0") == 0
    for text in ("0", "-2", "1.5", "x"):
        with pytest.raises(argparse.ArgumentTypeError, match="expected an integer >= 1"):
            int_at_least(1)(text)


def test_env_count_lists_are_parsed_and_each_entry_checked():
    assert int_list_at_least(1)("64, 1024,") == [64, 1024]
    assert int_list_at_least(1)("") == []
    with pytest.raises(argparse.ArgumentTypeError, match="got 0"):
        int_list_at_least(1)("64,0")


def test_seconds_must_be_finite_and_positive():
    assert positive_seconds("0.5") == 0.5
    for text in ("0", "-1", "nan", "inf", "soon"):
        with pytest.raises(argparse.ArgumentTypeError, match="finite number > 0"):
            positive_seconds(text)


@pytest.mark.parametrize("argv", [["--num-envs", "0"], ["--num-envs", "64,0"], ["--num-envs", ","],
                                  ["--nthread", "0"], ["--seconds", "0"]])
def test_the_host_bridge_benchmark_refuses_bad_counts_before_any_rollout(argv, capsys, monkeypatch):
    # 0 envs used to reach MuJoCo's rollout, which crashed the process (SIGSEGV).
    monkeypatch.setattr(mujoco_host, "_raw_runner", lambda *a, **k: pytest.fail("a rollout was built"))
    with pytest.raises(SystemExit) as exit_info:
        mujoco_host.main(argv)
    assert exit_info.value.code == 2
    assert f"{argv[0]}:" in capsys.readouterr().err
