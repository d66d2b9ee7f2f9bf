# dev: do unaligned bf16 GEMM dims (critic in 137, atoms 101, actor out 58) cost more than padded ones? H200, batch 8192.
import torch, time, json, os
torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = True
dev = os.environ.get("DEV", "cuda")
B = int(os.environ.get("B", "8192"))
sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
def bench(fn, n=int(os.environ.get("N", "300"))):
    for _ in range(20): fn()
    sync(); t = time.perf_counter()
    for _ in range(n): fn()
    sync(); return 1e3 * (time.perf_counter() - t) / n
out = {}
cases = {"critic_in": [(137, 768), (144, 768)], "critic_out": [(192, 101), (192, 104), (192, 128)],
         "actor_out": [(128, 58), (128, 64)], "actor_in": [(96, 512), (99, 512), (104, 512)]}
for name, shapes in cases.items():
    for k, n in shapes:
        x = torch.randn(B, k, device=dev, dtype=torch.bfloat16, requires_grad=True)
        w = torch.randn(n, k, device=dev, dtype=torch.bfloat16, requires_grad=True)
        b = torch.randn(n, device=dev, dtype=torch.bfloat16, requires_grad=True)
        g = torch.randn(B, n, device=dev, dtype=torch.bfloat16)
        fwd = bench(lambda: torch.nn.functional.linear(x, w, b))
        def fb():
            y = torch.nn.functional.linear(x, w, b); y.backward(g)
        both = bench(fb)
        # ensemble of 2 as the critic runs its later layers: baddbmm (E, B, k) x (E, k, n)
        xe = torch.randn(2, B, k, device=dev, dtype=torch.bfloat16, requires_grad=True)
        we = torch.randn(2, n, k, device=dev, dtype=torch.bfloat16, requires_grad=True)
        be = torch.randn(2, 1, n, device=dev, dtype=torch.bfloat16, requires_grad=True)
        ge = torch.randn(2, B, n, device=dev, dtype=torch.bfloat16)
        def fbe():
            y = torch.baddbmm(be, xe, we.transpose(1, 2)); y.backward(ge)
        out[f"{name} {k}x{n}"] = {"linear_fwd_ms": fwd, "linear_fwd_bwd_ms": both, "bmm2_fwd_bwd_ms": bench(fbe)}
        print(f"{name:10s} {k:4d}x{n:4d}  fwd {fwd:.4f}  fwd+bwd {both:.4f}  ensemble-2 fwd+bwd {out[f'{name} {k}x{n}']['bmm2_fwd_bwd_ms']:.4f} ms", flush=True)
json.dump(out, open(os.path.join(os.environ.get("OUT", "/tmp"), "gemm-align.json"), "w"), indent=1)

# AdamW step cost on the FastSAC critic's and actor's parameter shapes (fused, capturable, as the
# learner builds it) against one flat tensor of the same size.
def shapes_critic(obs=137, w=768, atoms=101, e=2):
    return [(e * w, obs), (e * w,), (e, w // 2, w), (e, w // 2), (e, w // 4, w // 2), (e, w // 4), (e, atoms, w // 4), (e, atoms),
            (e, w), (e, w), (e, w // 2), (e, w // 2), (e, w // 4), (e, w // 4)]
def shapes_actor(obs=96, w=512, out=58):
    s = []; f = obs
    for d in range(3):
        h = w // 2**d; s += [(h, f), (h,), (h,), (h,)]; f = h
    return s + [(out, f), (out,)]
for name, shapes in (("critic", shapes_critic()), ("actor", shapes_actor())):
    for layout in ("per-tensor", "flat"):
        if layout == "flat":
            params = [torch.zeros(sum(torch.Size(s).numel() for s in shapes), device=dev, requires_grad=True)]
        else:
            params = [torch.zeros(s, device=dev, requires_grad=True) for s in shapes]
        opt = torch.optim.AdamW(params, lr=3e-4, weight_decay=1e-3, fused=True, capturable=True)
        for p in params: p.grad = torch.randn_like(p)
        ms = bench(opt.step)
        numel = sum(p.numel() for p in params)
        out[f"adamw {name} {layout}"] = {"ms": ms, "numel": numel, "tensors": len(params)}
        print(f"adamw {name:6s} {layout:10s} {len(params):3d} tensors {numel/1e6:.2f}M  {ms:.4f} ms", flush=True)
json.dump(out, open(os.path.join(os.environ.get("OUT", "/tmp"), "gemm-align.json"), "w"), indent=1)
