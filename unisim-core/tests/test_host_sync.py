"""The host-sync probe reports what makes the host wait, and nothing else."""

import pytest
import torch
from unisim.host_sync import HostSyncProbe

x = torch.arange(6.0)
mask = x > 2


@pytest.mark.parametrize("op,reported", [
    (lambda: mask.nonzero(), "nonzero"),
    (lambda: x.sum().item(), "_local_scalar_dense"),
    (lambda: bool(mask.any()), "_local_scalar_dense"),
    (lambda: x[mask], "index"),
    (lambda: x.masked_select(mask), "masked_select"),
    (lambda: x.unique(), "_unique2"),
    (lambda: torch.repeat_interleave(torch.tensor([1, 2])), "repeat_interleave"),
    (lambda: x.tolist(), "Tensor.tolist"),
    (lambda: x.numpy(), "Tensor.numpy"),
])
def test_sync_points_are_reported_with_their_source_line(op, reported):
    with HostSyncProbe() as probe:
        op()
    assert len(probe.syncs) == 1 and probe.syncs[0].startswith(reported), probe.syncs
    assert "test_host_sync.py" in probe.syncs[0]


def test_masked_device_work_is_not_a_sync():
    with HostSyncProbe() as probe:
        y = torch.where(mask, x, 0.0)
        y.masked_fill_(~mask, 1.0)
        x.index_select(0, torch.tensor([0, 2]))
        torch.repeat_interleave(x, 2)
    assert probe.syncs == []
    assert probe.op_count >= 4


def test_views_are_counted_as_ops_but_not_as_kernels():
    with HostSyncProbe() as probe:
        x[1:4].unsqueeze(0).expand(3, -1)
    assert probe.op_count == 3 and probe.kernel_op_count == 0
    with HostSyncProbe() as probe:
        (x[1:4] * 2).sum()
    assert probe.op_count == 3 and probe.kernel_op_count == 2


def test_paused_regions_are_ignored_and_tensor_methods_are_restored():
    original = torch.Tensor.tolist
    with HostSyncProbe() as probe:
        with probe.paused():
            mask.nonzero()
            x.tolist()
    assert probe.syncs == [] and probe.op_count == 0
    assert torch.Tensor.tolist is original


def test_ignoring_pauses_only_the_named_methods_and_restores_them():
    class Bridge:
        def read(self):
            return mask.nonzero()

    bridge = Bridge()
    with HostSyncProbe() as probe:
        with probe.ignoring(bridge, "read"):
            bridge.read()
        assert probe.syncs == []
        bridge.read()
    assert len(probe.syncs) == 1
    assert "read" not in bridge.__dict__
