"""The process clock counts from the process's own start, so imports before a command are seen;
and it reads whether the interpreter keeps compiled modules."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from unilab_rl.cli.process_clock import python_writes_bytecode, seconds_since_process_start

LINUX_PROC = Path("/proc/self/stat").exists()


@pytest.mark.skipif(not LINUX_PROC, reason="the process start time comes from Linux's /proc")
def test_a_fresh_process_reports_the_time_it_spent_before_asking():
    code = ("import time; time.sleep(0.6); from unilab_rl.cli.process_clock import python_writes_bytecode, seconds_since_process_start as age; "
            "print(age())")
    age = float(subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout)
    assert 0.6 <= age < 30.0


@pytest.mark.skipif(not LINUX_PROC, reason="the process start time comes from Linux's /proc")
def test_the_age_grows_with_the_wall_clock():
    import time

    first = seconds_since_process_start()
    time.sleep(0.05)
    second = seconds_since_process_start()
    assert first is not None and second is not None and second >= first + 0.03


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
