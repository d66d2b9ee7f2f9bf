"""Inductor's byte estimate for FlashSAC's critic loss (fwd+bwd, CPU bf16 autocast) per BatchNorm-statistics form."""
import json, logging, sys
import torch
import torch._inductor.metrics as metrics
import unilab_rl.networks.flash as flash

torch._logging.set_logs(inductor_metrics=True)
logging.getLogger("torch._inductor").setLevel(logging.WARNING)
OBS, ACT, BATCH, FORM = 108, 29, int(sys.argv[1]), sys.argv[2]

def forward(self, x):
    x = x.float()
    if self.training:
        if FORM == "two_pass":
            mean = x.mean(dim=1, keepdim=True)
            var = (x - mean).square().mean(dim=1, keepdim=True)
        elif FORM == "var_mean":
            var, mean = torch.var_mean(x, dim=1, keepdim=True, correction=0)
        elif FORM == "detached_mean_in_var":
            mean = x.mean(dim=1, keepdim=True)
            var = (x - mean.detach()).square().mean(dim=1, keepdim=True)
        with torch.no_grad():
            self.running_mean.lerp_(mean, self.momentum)
            self.running_var.lerp_(var, self.momentum)
    else:
        mean, var = self.running_mean, self.running_var
    return (x - mean) * torch.rsqrt(var + self.eps) * self.scale + self.bias

flash.UnitBatchNorm.forward = forward
torch.manual_seed(0)
net = flash.FlashCriticEnsemble(OBS, ACT, 256, 2, 2, 101)
obs, act = torch.randn(BATCH, OBS), torch.randn(BATCH, ACT)
target = torch.softmax(torch.randn(2, BATCH, 101), -1)
def loss_fn(o, a):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits = net(o, a).float()
    return -(target * logits.log_softmax(-1)).sum(-1).mean()
torch._dynamo.reset(); metrics.reset()
loss = torch.compile(loss_fn)(obs, act); loss.backward()
grads = torch.cat([p.grad.flatten() for p in net.parameters()])
torch.save(grads, f"/tmp/bn/grads-{FORM}-{BATCH}.pt")
print(json.dumps({"form": FORM, "batch": BATCH, "bytes": metrics.num_bytes_accessed, "loss": float(loss)}))
