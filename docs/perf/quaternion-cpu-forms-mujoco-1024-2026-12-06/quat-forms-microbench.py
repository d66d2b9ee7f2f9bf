"""Each form of the quaternion helpers timed on this CPU (torch on 1 thread), at the tracking
task's shapes for 1024 envs: median of 7 samples of 50 calls, ms per call.

    python quat-forms-microbench.py > quat-forms-microbench.txt
"""

import statistics
import time

import torch

import unilab.math as lm

torch.set_num_threads(1)


def per_call_ms(fn, calls=50, samples=7) -> float:
    fn()
    times = []
    for _ in range(samples):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - t0) / calls * 1e3)
    return statistics.median(times)


g = torch.Generator().manual_seed(0)
for shape in [(1024,), (1024, 14), (1024, 15)]:
    a = torch.nn.functional.normalize(torch.randn(*shape, 4, generator=g), dim=-1)
    b = torch.nn.functional.normalize(torch.randn(*shape, 4, generator=g), dim=-1)
    print(f"{shape}: product bilinear {per_call_ms(lambda: lm._quat_mul_bilinear(a, b)):.3f} ms, "
          f"complex {per_call_ms(lambda: lm._quat_mul_complex(a, b)):.3f} ms; rotation columns bilinear "
          f"{per_call_ms(lambda: lm._matrix_first_two_columns_bilinear(a)):.3f} ms, components "
          f"{per_call_ms(lambda: lm._matrix_first_two_columns_by_components(a)):.3f} ms")
