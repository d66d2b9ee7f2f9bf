"""The generated support matrix: one table per device, a backend that does not build is listed."""

from __future__ import annotations

import pytest
import torch
import unisim
from unisim import support_matrix


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_every_backend_that_cannot_build_on_a_device_is_listed_with_its_error():
    lines = support_matrix.rows("cuda")
    assert lines[0].startswith("| backend | data plane | device (cuda run) |")
    listed = [line.split(" | ")[0].removeprefix("| ") for line in lines[2:]]
    assert listed == list(unisim.backend_scope().active)
    assert all("fails to build on cuda: ContractViolation" in line for line in lines[2:])


def test_the_cpu_table_lists_the_declarations_of_a_backend_that_builds(monkeypatch):
    monkeypatch.setattr(unisim, "backend_scope", lambda: type("Scope", (), {"active": ("mujoco",), "shelved": ()})())
    lines = support_matrix.rows("cpu")
    assert len(lines) == 3 and lines[2].startswith("| mujoco | host_bridge | cpu | immediate |")
    assert "contact_sensors" in lines[2] and "any, bodies, geoms, self (cleared)" in lines[2]


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_each_devices_table_comes_from_its_own_process_and_reads_the_same():
    # A simulator that binds one device per process (Genesis) must not see the cpu table's build.
    assert support_matrix.rows_in_own_process("cuda") == support_matrix.rows("cuda")


def test_a_failing_table_process_is_an_error_that_names_the_device(monkeypatch):
    monkeypatch.setattr(support_matrix.sys, "executable", "false")
    with pytest.raises(RuntimeError, match="the cuda table's process failed"):
        support_matrix.rows_in_own_process("cuda")
