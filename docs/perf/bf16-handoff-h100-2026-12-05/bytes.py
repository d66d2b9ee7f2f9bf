"""Inductor's estimate of the bytes its kernels read and write (forward + backward) for one
critic loss of each learner, with and without the bf16 hand-off (CPU autocast, G1 sizes)."""
import json, logging, sys
import torch
import torch._inductor.metrics as metrics
import unilab_rl.networks.flash as flash
import unilab_rl.networks.mlp as mlp

torch._logging.set_logs(inductor_metrics=True)
logging.getLogger("torch._inductor").setLevel(logging.WARNING)
OBS, ACT, BATCH = 108, 29, int(sys.argv[1]) if len(sys.argv) > 1 else 512


def measure(build, handoff: bool) -> int:
    if not handoff:
        flash.as_gemm_input = mlp.as_gemm_input = lambda t: t
    torch.manual_seed(0)
    net = build()
    obs, act = torch.randn(BATCH, OBS), torch.randn(BATCH, ACT)
    target = torch.softmax(torch.randn(2, BATCH, 101), -1)

    def loss_fn(o, a):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = net(o, a).float()
        return -(target * logits.log_softmax(-1)).sum(-1).mean()

    torch._dynamo.reset(); metrics.reset()
    compiled = torch.compile(loss_fn)
    compiled(obs, act).backward()
    return metrics.num_bytes_accessed


nets = {
    "flashsac_critic": lambda: flash.FlashCriticEnsemble(OBS, ACT, 256, 2, 2, 101),
    "fastsac_critic": lambda: mlp.CategoricalCriticEnsemble(OBS, ACT, 768, 2, 101),
}
which, handoff = sys.argv[2], sys.argv[3] == "1"
print(json.dumps({"net": which, "handoff": handoff, "batch": BATCH, "bytes": measure(nets[which], handoff)}))
