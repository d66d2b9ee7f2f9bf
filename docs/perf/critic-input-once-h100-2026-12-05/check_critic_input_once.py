"""Old (input expanded per member) vs new (one copy) FlashCriticEnsemble: same outputs, grads, running stats?"""
import copy, sys, time
import torch
from unilab_rl.networks.flash import FlashCriticEnsemble

def old_forward(self, obs, action):
    x = torch.cat([obs, action], dim=-1).unsqueeze(0).expand(self.ensemble, -1, -1)
    return self.head(self.trunk(x))

def run(net, obs, act, train, amp, compiled):
    net = copy.deepcopy(net); net.train(train)
    a = act.clone().requires_grad_(True)
    f = torch.compile(net) if compiled else net
    with torch.autocast(DEV, dtype=torch.bfloat16, enabled=amp):
        logits = f(obs, a).float()
    loss = (logits.log_softmax(-1) * torch.linspace(-1, 1, logits.shape[-1], device=DEV)).sum(-1).mean(-1).sum()
    loss.backward()
    grads = {n: p.grad.clone() for n, p in net.named_parameters()}
    bufs = {n: b.clone() for n, b in net.named_buffers()}
    return logits.detach(), a.grad.clone(), grads, bufs

torch.manual_seed(0)
B = int(sys.argv[1]) if len(sys.argv) > 1 else 2048
DEV = sys.argv[2] if len(sys.argv) > 2 else "cpu"
net = FlashCriticEnsemble(108, 29, 256, 2, 2, 101).to(DEV)
obs, act = (torch.randn(B, 108) * 3 + 1).to(DEV), (torch.rand(B, 29) * 2 - 1).to(DEV)
New = FlashCriticEnsemble.forward
for compiled in (False, True):
    for amp in (False, True):
        for train in (True, False):
            FlashCriticEnsemble.forward = old_forward
            o = run(net, obs, act, train, amp, compiled)
            FlashCriticEnsemble.forward = New
            n = run(net, obs, act, train, amp, compiled)
            same_logits = torch.equal(o[0], n[0]); same_ag = torch.equal(o[1], n[1])
            gd = max((o[2][k] - n[2][k]).abs().max().item() for k in o[2])
            gsame = all(torch.equal(o[2][k], n[2][k]) for k in o[2])
            bsame = all(torch.equal(o[3][k], n[3][k]) for k in o[3])
            print(f"compiled={compiled} amp={amp} train={train}: logits equal {same_logits} "
                  f"(max diff {(o[0]-n[0]).abs().max().item():.3g}), action grad equal {same_ag} "
                  f"(max {(o[1]-n[1]).abs().max().item():.3g}), param grads equal {gsame} (max {gd:.3g}), buffers equal {bsame}", flush=True)
