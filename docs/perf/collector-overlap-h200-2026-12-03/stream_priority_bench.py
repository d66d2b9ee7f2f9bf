# dev: run unilab-bench with the learner stream at a given CUDA priority (PRIO env var; lower = higher)
import os, sys, torch
import unilab_rl.learner_stream as ls
prio = int(os.environ.get("PRIO", "0"))
orig = ls.LearnerStream.__init__
def init(self, device):
    orig(self, device)
    self.stream = torch.cuda.Stream(device, priority=prio)
    print("learner stream priority", self.stream.priority, "range", torch.cuda.Stream.priority_range(), flush=True)
ls.LearnerStream.__init__ = init
from unilab_rl.cli.bench import main
sys.exit(main())
