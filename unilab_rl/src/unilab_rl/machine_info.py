"""What a benchmark's numbers depend on: the machine (recorded whether or not it could be
controlled) and the versions of the packages that ran."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import shutil
import subprocess
from pathlib import Path
from typing import Any


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def _run_text(cmd: list[str]) -> str | None:
    if shutil.which(cmd[0]) is None:
        return None
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None


def machine() -> dict[str, Any]:
    """What the numbers depend on, recorded whether or not it could be controlled."""
    cpuinfo = _read("/proc/cpuinfo") or ""
    models = [line.split(":", 1)[1].strip() for line in cpuinfo.splitlines() if line.startswith("model name")]
    governor_path = "/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"
    nodes = sorted(p.name for p in Path("/sys/devices/system/node").glob("node[0-9]*"))
    gpus = _run_text(["nvidia-smi", "--query-gpu=index,name,driver_version,memory.total,clocks.max.sm,"
                      "power.limit,persistence_mode", "--format=csv,noheader"])
    return {
        "hostname": platform.node(), "platform": platform.platform(),
        "cpu_model": models[0] if models else platform.processor() or None,
        "logical_cpus": os.cpu_count(), "sched_affinity": len(os.sched_getaffinity(0)),
        "scaling_governor": _read(governor_path),
        "governor_controllable": os.access(governor_path, os.W_OK),
        "numa_nodes": nodes, "load_average": list(os.getloadavg()),
        "lscpu": _run_text(["lscpu"]),
        "gpus": gpus.splitlines() if gpus else None,
        "gpu_topology": _run_text(["nvidia-smi", "topo", "-m"]),
    }


def cpu_identity(lscpu: str | None) -> str | None:
    """The CPU's family, model and stepping as lscpu gives them ("6/143/8"), or None. A virtual
    machine may name every host's CPU alike ("Intel(R) Xeon(R) Processor"); these numbers still
    tell two CPU generations apart."""
    fields = dict(line.split(":", 1) for line in (lscpu or "").splitlines() if ":" in line)
    values = [fields.get(key, "").strip() for key in ("CPU family", "Model", "Stepping")]
    return "/".join(values) if all(values) else None


def versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for dist in ("torch", "mujoco", "mujoco-warp", "warp-lang", "genesis-world"):
        try:
            out[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            pass
    return out
