"""CUDA-graph replay of learner updates (unilab_rl.graphed_updates.CudaGraphUpdates).

The parity tests need a GPU: CI has none, they run on a GPU machine. On CPU the flag must
leave the eager path untouched, which CI checks.
"""

import copy

import pytest
import torch
from helpers import TINY, run_two_ranks, set_rank_environment
from unilab_rl.algorithms import build_agent, build_config
from unilab_rl.contract import EnvSpec, ReplayBatch

ALGOS = ["flashsac", "fastsac"]
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a GPU (device machine)")
needs_two_gpus = pytest.mark.skipif(torch.cuda.device_count() < 2 or not torch.distributed.is_nccl_available(),
                                    reason="NCCL data parallelism needs 2 GPUs (device machine nvidia-h200-x2)")
OBS = {"policy": 11, "critic": 14}
ACTION_DIM = 5
BATCH = 64


def agent_on(device: str, algo: str, cuda_graph: bool, seed: int = 0):
    torch.manual_seed(seed)
    spec = EnvSpec(num_envs=8, device=torch.device(device), observation_spec=OBS, action_dim=ACTION_DIM,
                   max_episode_length=100, step_dt=0.02)
    # fp32 so eager and replayed kernels see identical inputs and may be compared tightly; an
    # averaged policy so its Polyak step is captured and replayed too.
    config = build_config(algo, {**TINY[algo], "batch_size": BATCH, "amp": False, "cuda_graph": cuda_graph,
                                 "averaged_policy_tau": 0.1})
    return build_agent(algo, spec, config, spec.device)


def random_batches(device: str, count: int, seed: int = 1) -> list[ReplayBatch]:
    generator = torch.Generator().manual_seed(seed)

    def group() -> dict[str, torch.Tensor]:
        return {g: torch.randn(BATCH, d, generator=generator).to(device) for g, d in OBS.items()}

    return [ReplayBatch(obs=group(), action=(torch.rand(BATCH, ACTION_DIM, generator=generator) * 2 - 1).to(device),
                        reward=torch.randn(BATCH, generator=generator).to(device),
                        discount=torch.full((BATCH,), 0.97).to(device), next_obs=group())
            for _ in range(count)]


def run_updates(agent, batches, seed: int = 7) -> list[dict[str, float]]:
    torch.manual_seed(seed)  # the update's own noise (next actions, actor samples)
    return [{k: v.item() for k, v in agent.update(batch).items()} for batch in batches]


def assert_same_learner(graphed, eager) -> None:
    for name in ("actor", "critic", "target_critic", "averaged_actor"):
        ours, theirs = getattr(graphed, name).state_dict(), getattr(eager, name).state_dict()
        for key in theirs:
            torch.testing.assert_close(ours[key], theirs[key], rtol=1e-4, atol=1e-5, msg=f"{name}.{key}")
    torch.testing.assert_close(graphed.log_temperature, eager.log_temperature, rtol=1e-4, atol=1e-6)


@needs_cuda
@pytest.mark.parametrize("algo", ALGOS)
def test_replayed_updates_match_eager_updates(algo):
    # 12 updates: both variants (critic only, critic + actor) warm up, get captured and replay
    # several times with fresh batches, so stale inputs or a missed state write would show.
    batches = random_batches("cuda", 12)
    graphed, eager = agent_on("cuda", algo, True), agent_on("cuda", algo, False)
    assert graphed.update_graphs is not None and eager.update_graphs is None
    graphed_metrics, eager_metrics = run_updates(graphed, batches), run_updates(eager, batches)
    assert len(graphed.update_graphs.graphs) == 2  # both variants were captured and replayed
    for step, (ours, theirs) in enumerate(zip(graphed_metrics, eager_metrics, strict=True)):
        assert ours.keys() == theirs.keys(), step
        for key in theirs:
            assert ours[key] == pytest.approx(theirs[key], rel=1e-3, abs=1e-5), (step, key)
    assert_same_learner(graphed, eager)


@needs_cuda
@pytest.mark.parametrize("algo", ALGOS)
def test_loading_an_eager_checkpoint_recaptures_and_continues_like_eager(algo):
    batches = random_batches("cuda", 16)
    source = agent_on("cuda", algo, False)
    run_updates(source, batches[:4])
    state = source.state_dict()
    graphed, eager = agent_on("cuda", algo, True, seed=3), agent_on("cuda", algo, False, seed=3)
    run_updates(graphed, batches[:8])  # captured graphs that the load must invalidate
    # Separate copies: optimizer.load_state_dict keeps same-device tensors as they are, so
    # the two learners would otherwise share (and both advance) one optimizer state.
    graphed.load_state_dict(copy.deepcopy(state))
    eager.load_state_dict(copy.deepcopy(state))
    assert all(g["capturable"] for g in graphed.critic_optimizer.param_groups)
    assert graphed.update_graphs.graphs == {}
    run_updates(graphed, batches[4:])
    run_updates(eager, batches[4:])
    assert_same_learner(graphed, eager)


@needs_cuda
@pytest.mark.parametrize("algo", ALGOS)
def test_an_eager_learner_loading_a_graphed_checkpoint_keeps_its_step_counters_on_the_host(algo):
    graphed, eager = agent_on("cuda", algo, True), agent_on("cuda", algo, False)
    run_updates(graphed, random_batches("cuda", 6))
    eager.load_state_dict(copy.deepcopy(graphed.state_dict()))
    group = eager.temperature_optimizer.param_groups[0]
    assert group["capturable"] is False
    assert eager.temperature_optimizer.state[group["params"][0]]["step"].device.type == "cpu"
    run_updates(eager, random_batches("cuda", 2))


def halve_gradients(params) -> None:
    """A capturable stand-in for the data-parallel all-reduce: in-place work on the gradients."""
    for param in params:
        param.grad.mul_(0.5)


@needs_cuda
def test_a_gradient_hook_is_captured_and_runs_in_every_replay():
    batches = random_batches("cuda", 10)
    graphed, eager = agent_on("cuda", "flashsac", True), agent_on("cuda", "flashsac", False)
    graphed.gradient_hook = eager.gradient_hook = halve_gradients
    run_updates(graphed, batches)
    run_updates(eager, batches)
    assert len(graphed.update_graphs.graphs) == 2
    assert_same_learner(graphed, eager)


@needs_cuda
def test_changing_the_gradient_hook_after_capture_is_refused():
    agent = agent_on("cuda", "flashsac", True)
    batches = random_batches("cuda", 6)
    run_updates(agent, batches)  # captured without a hook
    agent.gradient_hook = halve_gradients
    with pytest.raises(RuntimeError, match="gradient hook changed after its updates were captured"):
        agent.update(batches[0])


@pytest.mark.parametrize("algo", ALGOS)
def test_on_cpu_the_flag_keeps_the_eager_update(algo):
    agent = agent_on("cpu", algo, True)
    assert agent.update_graphs is None
    assert not any(g["capturable"] for g in agent.critic_optimizer.param_groups)
    assert all(torch.isfinite(torch.tensor(list(m.values()))).all()
               for m in run_updates(agent, random_batches("cpu", 3)))


def nccl_rank_worker(rank: int, port: int, out: str, results: str) -> None:
    import os

    import torch.distributed as dist
    from unilab_rl.cli.launch import TORCHRUN_ENV
    from unilab_rl.learner import drop_update_graphs

    from unilab_rl import distributed

    for key, value in TORCHRUN_ENV.items():  # no NVLink multicast on shared machines
        os.environ.setdefault(key, value)
    set_rank_environment(rank, 2, port)
    device = f"cuda:{rank}"
    torch.cuda.set_device(device)
    dist.init_process_group("nccl", rank=rank, world_size=2)
    record = {}
    for cuda_graph in (True, False):
        agent = agent_on(device, "flashsac", cuda_graph)  # same seed: the ranks start equal
        agent.gradient_hook = distributed.average_gradients
        run_updates(agent, random_batches(device, 10, seed=rank + 1), seed=7 + rank)  # each rank its own data
        record[cuda_graph] = {
            "captured": 0 if agent.update_graphs is None else len(agent.update_graphs.graphs),
            "params": {f"{net}.{k}": v.detach().cpu() for net in ("actor", "critic")
                       for k, v in getattr(agent, net).named_parameters()},
            "log_temperature": agent.log_temperature.detach().cpu()}
        drop_update_graphs(agent)  # a live graph holding NCCL work would block the group's destruction
    dist.destroy_process_group()
    torch.save(record, os.path.join(results, f"rank{rank}.pt"))


@needs_two_gpus
def test_data_parallel_ranks_replay_the_all_reduce_and_stay_identical(tmp_path):
    first, second = run_two_ranks(nccl_rank_worker, tmp_path / "unused", tmp_path)
    assert first[True]["captured"] == second[True]["captured"] == 2
    for key, value in first[True]["params"].items():
        # The averaged gradient is the same on both ranks, so the weights are bit-identical...
        assert torch.equal(value, second[True]["params"][key]), key
        # ...and what the graphs replay is what the eager data-parallel update computes.
        torch.testing.assert_close(value, first[False]["params"][key], rtol=1e-4, atol=1e-5, msg=key)
    assert torch.equal(first[True]["log_temperature"], second[True]["log_temperature"])
