"""The process clock counts from the process's own start, so imports before a command are seen;
and it reads whether the interpreter keeps compiled modules."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from unilab_rl.cli.process_clock import python_writes_bytecode

LINUX_PROC = Path("/proc/self/stat").exists()


@pytest.mark.skipif(not LINUX_PROC, reason="the process start time comes from Linux's /proc")
def test_a_fresh_process_reports_the_time_it_spent_before_asking():
    code = ("import time; time.sleep(0.6); from unilab_rl.cli.process_clock import python_writes_bytecode, seconds_since_process_start as age; "
            "print(age())")
    age = float(subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout)
    assert 0.6 <= age < 30.0


def test_the_age_is_the_uptime_less_the_start_tick(monkeypatch, tmp_path):
    import unilab_rl.cli.process_clock as clock

    # A command name holding spaces and a parenthesis: the fields count from its last ')'.
    fields_after_name = ["S"] + ["0"] * 18 + ["250"] + ["0"] * 10  # field 22: started at tick 250
    (tmp_path / "stat").write_text("4242 (python (x) y) " + " ".join(fields_after_name))
    monkeypatch.setattr(clock, "_STAT", tmp_path / "stat")
    monkeypatch.setattr(clock.os, "sysconf", lambda name: 100)  # 100 ticks a second
    for uptime, age in ((10.0, 7.5), (12.25, 9.75), (2.0, 0.0)):  # never negative
        (tmp_path / "uptime").write_text(f"{uptime} 1.0\n")
        monkeypatch.setattr(clock, "_UPTIME", tmp_path / "uptime")
        assert clock.seconds_since_process_start() == pytest.approx(age)


def test_without_proc_the_age_is_unknown(monkeypatch, tmp_path):
    import unilab_rl.cli.process_clock as clock

    monkeypatch.setattr(clock, "_STAT", tmp_path / "missing")
    assert clock.seconds_since_process_start() is None


def test_python_writes_bytecode_reads_the_interpreter_flag():
    probe = "from unilab_rl.cli.process_clock import python_writes_bytecode as w; print(w())"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    for flag, expected in (([], "True"), (["-B"], "False")):
        result = subprocess.run([sys.executable, *flag, "-c", probe], capture_output=True, text=True, env=env,
                                check=True)
        assert result.stdout.strip() == expected
    assert python_writes_bytecode() is (not sys.flags.dont_write_bytecode)
