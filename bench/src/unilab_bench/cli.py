"""``unilab-bench``: the project's benchmarks behind one command.

``env`` (the Manager env step next to raw physics), ``backend`` and ``backend-host`` (adapters
next to raw engine stepping), ``collector`` and ``learner`` (the training stack), ``matrix`` (the
collector cases, optionally paired against a base revision), ``compare`` (a head record against a
base by the staged budget), ``peer`` (another project's own G1 env, in its own Python environment)
and ``results`` (the results store and the docs generated from it).
"""

from __future__ import annotations

import sys
from collections.abc import Callable


def _commands() -> dict[str, Callable[[list[str]], int | None]]:
    # Imported on use: each benchmark pulls in its own simulators and the training stack.
    import unisim_bench.backend
    import unisim_bench.mujoco_host

    import unilab_bench.collector
    import unilab_bench.compare
    import unilab_bench.env_step
    import unilab_bench.matrix

    return {
        "env": unilab_bench.env_step.main,
        "backend": unisim_bench.backend.main,
        "backend-host": unisim_bench.mujoco_host.main,
        "matrix": unilab_bench.matrix.main,
        "compare": unilab_bench.compare.main,
    }


def main(argv: list[str] | None = None, factory=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "results":
        from unilab_bench.results.cli import main as results_main

        return results_main(argv[1:])
    if argv and argv[0] == "peer":  # imports no simulator here: the peer runs in its own environment
        from unilab_bench.peers.command import main as peer_main

        return peer_main(argv[1:])
    if argv and argv[0] in ("env", "backend", "backend-host", "matrix", "compare"):
        rc = _commands()[argv[0]](argv[1:])
        return 0 if rc is None else rc
    from unilab_bench.collector import main as collector_main

    return collector_main(argv, factory=factory)


if __name__ == "__main__":
    sys.exit(main())
