"""``unilab-bench peer`` without any peer installed: the driver's argument checks, what it may import,
its timing loop and record on a fake env, the command's subprocess environment and end-to-end run
with a stub interpreter, the store record, and the README/results rows the renderer makes of it."""

from __future__ import annotations

import argparse
import ast
import json
import os
import sys
from pathlib import Path

import pytest
import torch
from test_results_store import env_full
from unilab_bench import cli as bench_cli
from unilab_bench.peers import command, driver
from unilab_bench.peers.record import check_full, peer_record
from unilab_bench.results import render, store

H100 = "0, NVIDIA H100 80GB HBM3, 580.159.04, 81559 MiB, 1980 MHz, 700.00 W, Enabled"


def args(**kw) -> argparse.Namespace:
    base = {"project": "mjlab", "num_envs": 8, "device": "cpu", "steps": 5, "samples": 1, "warmup": 2, "seed": 0,
            "sim": None, "site": ["/tmp/site-mjlab"]}
    return argparse.Namespace(**{**base, **kw})


# ---- the driver's argument checks ---------------------------------------------------------------
def test_good_arguments_have_no_problem():
    assert driver.check_args(args()) == []
    assert driver.check_args(args(project="unilab-1.5.2", sim="mujoco")) == []
    assert driver.check_args(args(project="unilab-1.5.2", device="cuda:1")) == []


@pytest.mark.parametrize(("change", "names"), [
    ({"project": "isaaclab"}, "--project"),
    ({"num_envs": 0}, "--num-envs"),
    ({"steps": -1}, "--steps"),
    ({"samples": 0}, "--samples"),
    ({"warmup": -1}, "--warmup"),
    ({"seed": -3}, "--seed"),
    ({"device": "gpu"}, "--device"),
    ({"device": "cuda:x"}, "--device"),
    ({"sim": "genesis"}, "--sim"),
    ({"site": []}, "--site"),
])
def test_each_bad_argument_is_named(change, names):
    problems = driver.check_args(args(**change))
    assert len(problems) == 1 and problems[0].startswith(names), problems


def test_unilab_mjwarp_on_a_cpu_is_refused_before_anything_is_built():
    # unilab 1.5.2's mjwarp backend refuses a CPU device by design: the check says so and what works
    (problem,) = driver.check_args(args(project="unilab-1.5.2", device="cpu"))
    assert "CUDA-only" in problem and "--sim mujoco" in problem
    assert driver.check_args(args(project="mjlab", device="cpu")) == []  # mjlab steps warp's CPU device


def test_parse_exits_on_a_bad_argument_and_fills_defaults(tmp_path):
    with pytest.raises(SystemExit):
        driver.parse(["--project", "mjlab", "--num-envs", "0", "--site", str(tmp_path), "--out", "x.json"])
    parsed = driver.parse(["--project", "unilab-1.5.2", "--device", "cuda", "--site", str(tmp_path),
                           "--out", "rel/x.json"])
    assert parsed.device == "cuda:0" and parsed.sim == "mjwarp"
    assert Path(parsed.out).is_absolute()  # the unilab builder changes the working folder


# ---- what the driver may import ------------------------------------------------------------------
def test_the_driver_imports_only_the_standard_library_torch_and_the_peers():
    tree = ast.parse(Path(driver.__file__).read_text())
    top_level, anywhere = set(), set()
    for node in ast.walk(tree):
        names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                 else [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 else [])
        anywhere |= {n.split(".")[0] for n in names}
    for node in tree.body:  # module level: the standard library only (the CLI imports the driver)
        if isinstance(node, ast.Import):
            top_level |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            top_level.add(node.module.split(".")[0])
    assert top_level <= set(sys.stdlib_module_names) | {"__future__"}, top_level
    peers = {"torch", "mjlab", "unilab", "hydra", "mujoco"}  # unilab here is the peer unilab 1.5.2
    assert anywhere - set(sys.stdlib_module_names) - {"__future__"} <= peers, anywhere
    assert not anywhere & {"unilab_bench", "unilab_rl", "unisim", "unisim_bench"}


def test_a_peer_module_from_outside_its_site_is_refused(tmp_path):
    # our own unilab is importable here: it is not the peer, and the driver says where it came from
    with pytest.raises(SystemExit, match="not from"):
        driver.import_peer("unilab-1.5.2", [str(tmp_path)])


# ---- the timing loop and the record, on a fake env -----------------------------------------------
class FakeEnv:
    def __init__(self):
        self.actions = []

    def step(self, action):
        self.actions.append(action.clone())


def test_measure_warms_up_then_interleaves_zero_and_random_samples():
    env = FakeEnv()
    peer = driver.Peer(env, env.step, 3, {})
    got = driver.measure(peer, args(num_envs=4, steps=6, samples=3, warmup=2))
    assert len(env.actions) == 2 * 2 + 3 * 2 * 6
    zeros, random = env.actions[4:10], env.actions[10:16]  # the first round: zero actions, then random
    assert all(a.shape == (4, 3) and not a.any() for a in zeros)
    assert all(a.abs().max() <= 1 and a.any() for a in random)
    assert not torch.equal(random[0], random[1])  # a pool, cycled
    for name in ("env_zero", "env_random"):
        stats, samples = got["env_steps_per_s"][name], got["env_steps_per_s_samples"][name]
        assert len(samples) == 3 and stats["min"] <= stats["median"] <= stats["max"]
        assert all(s > 0 for s in samples)


def test_the_record_names_the_project_versions_physics_and_figures(monkeypatch):
    env = FakeEnv()
    info = {"task": "Mjlab-Velocity-Flat-Unitree-G1", "entry": "load_env_cfg", "cuda_graph": False,
            "physics": {"timestep": 0.005, "decimation": 4, "iterations": 10, "ls_iterations": 20}}
    monkeypatch.setattr(driver, "import_peer", lambda project, sites: driver)
    monkeypatch.setitem(driver.BUILDERS, "mjlab", lambda a: driver.Peer(env, env.step, 29, dict(info)))
    record = driver.run(driver.parse(["--project", "mjlab", "--device", "cpu", "--num-envs", "2", "--steps", "2",
                                      "--samples", "2", "--warmup", "1", "--site", "/tmp", "--out", "x.json"]))
    assert record["benchmark"] == "unilab_bench.peers"
    assert (record["project"], record["version"], record["task"]) == ("mjlab", "1.6.0", info["task"])
    assert record["num_envs"] == 2 and record["device"] == "cpu" and record["gpu"] is None
    assert set(record["versions"]) >= {"mjlab", "torch", "mujoco", "mujoco-warp", "warp-lang", "python"}
    assert record["physics"]["decimation"] == 4 and record["ours"] == "g1_walk_flat"
    assert set(record["env_steps_per_s"]) == {"env_zero", "env_random"}
    assert "--project mjlab" in record["driver_command"]
    check_full(record)


# ---- the command: its checks, the driver's environment, an end-to-end run with a stub interpreter --
def test_command_checks_the_site_interpreter_and_out(tmp_path):
    parsed = command.build_parser().parse_args(["--project", "mjlab", "--site", str(tmp_path / "none"),
                                                "--python", "no-such-python", "--out", str(tmp_path)])
    problems = command.check(parsed)
    assert any(p.startswith("--site") for p in problems)
    assert any(p.startswith("--python") for p in problems)
    assert any(p.startswith("--out") for p in problems)


def test_the_driver_sees_the_peer_sites_alone_on_pythonpath(tmp_path):
    env = command.peer_env([str(tmp_path), "/tmp/b"], base={"PYTHONPATH": "/tmp/site:/ours/src", "PYTHONHOME": "x"})
    assert env["PYTHONPATH"] == os.pathsep.join([str(tmp_path.resolve()), str(Path("/tmp/b").resolve())])
    assert env["PYTHONNOUSERSITE"] == "1" and "PYTHONHOME" not in env


STUB = """#!{python}
import json, os, sys
argv = sys.argv[2:]
out = argv[argv.index("--out") + 1]
record = json.load(open({canned!r}))
record["seen_pythonpath"] = os.environ["PYTHONPATH"]
record["seen_argv"] = argv
json.dump(record, open(out, "w"))
"""


def canned(tmp_path: Path) -> dict:
    return {"benchmark": "unilab_bench.peers", "project": "unilab-1.5.2", "version": "1.5.2", "task": "g1_walk_flat",
            "sim": "mjwarp", "num_envs": 4096, "device": "cuda:0", "gpu": "NVIDIA H100 80GB HBM3",
            "ours": "g1_walk_flat", "cuda_graph": True,
            "physics": {"timestep": 1 / 150, "decimation": 3, "solver": "newton", "iterations": 100,
                        "ls_iterations": 50, "nconmax": 128, "njmax": 256, "nq": 36},
            "env_steps_per_s": {"env_zero": {"min": 1.9e5, "median": 2.0e5, "max": 2.1e5},
                                "env_random": {"min": 1.7e5, "median": 1.8e5, "max": 1.9e5}},
            "versions": {"unilab": "1.5.2", "torch": "2.11.0", "mujoco": "3.11.0", "mujoco-warp": "3.11.0",
                         "warp-lang": "1.16.0"}, "time": "2026-12-08T10:00:00+0000"}


def test_the_command_runs_the_driver_writes_out_and_appends_a_record(tmp_path, monkeypatch):
    (tmp_path / "canned.json").write_text(json.dumps(canned(tmp_path)))
    stub = tmp_path / "python-stub"
    stub.write_text(STUB.format(python=sys.executable, canned=str(tmp_path / "canned.json")))
    stub.chmod(0o755)
    site, out, kept = tmp_path / "site", tmp_path / "out" / "peer.json", tmp_path / "records.jsonl"
    site.mkdir()
    monkeypatch.setenv("PYTHONPATH", "/ours/src")
    assert command.main(["--project", "unilab-1.5.2", "--python", str(stub), "--site", str(site), "--device", "cuda",
                         "--steps", "7", "--out", str(out), "--record", str(kept)]) == 0
    full = json.loads(out.read_text())
    assert full["seen_pythonpath"] == str(site.resolve())  # the caller's PYTHONPATH is not the peer's
    assert full["seen_argv"][full["seen_argv"].index("--steps") + 1] == "7"
    assert full["command"] and "machine" in full and full["site"] == [str(site.resolve())]
    (record,) = store.read(kept)
    assert record["kind"] == "env" and record["subject"]["project"] == "unilab-1.5.2"
    assert record["figures"]["env_steps_per_s"]["median"] == 2.0e5


def test_a_failing_driver_leaves_no_record(tmp_path):
    stub = tmp_path / "python-stub"
    stub.write_text(f"#!{sys.executable}\nimport sys\nsys.exit(3)\n")
    stub.chmod(0o755)
    with pytest.raises(SystemExit, match="exited 3"):
        command.main(["--project", "mjlab", "--python", str(stub), "--site", str(tmp_path), "--device", "cpu",
                      "--out", str(tmp_path / "p.json"), "--record", str(tmp_path / "r.jsonl")])
    assert not (tmp_path / "r.jsonl").exists() and not (tmp_path / "p.json").exists()


def test_the_bench_cli_dispatches_peer(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        bench_cli.main(["peer", "--help"])
    assert exit_.value.code == 0 and "--project" in capsys.readouterr().out


# ---- the store record and peer add ----------------------------------------------------------------
def test_the_store_record_names_the_project_and_its_task(tmp_path):
    record = peer_record({**canned(tmp_path), "machine": {"gpus": [H100], "cpu_model": "Xeon"}})
    s = record["subject"]
    assert record["kind"] == "env" and record["gpu"] == "NVIDIA H100 80GB HBM3"
    assert s["task"] == "unilab-1.5.2/g1_walk_flat" and s["project_version"] == "1.5.2" and s["ours"] == "g1_walk_flat"
    assert "nq" not in s["physics"] and s["physics"]["decimation"] == 3
    assert set(record["figures"]) == {"env_steps_per_s", "random_steps_per_s"}
    assert "unilab-1.5.2-g1_walk_flat-mjwarp-4096-h100" in record["id"]


def test_a_peer_json_without_its_random_row_is_refused(tmp_path):
    full = canned(tmp_path)
    del full["env_steps_per_s"]["env_random"]
    with pytest.raises(ValueError, match="env_random"):
        peer_record(full)
    with pytest.raises(ValueError, match="not a unilab-bench peer"):
        peer_record(env_full())


def test_peer_add_appends_once(tmp_path):
    path, kept = tmp_path / "peer.json", tmp_path / "records.jsonl"
    path.write_text(json.dumps(canned(tmp_path)))
    assert command.main(["add", str(path), "--record", str(kept), "--caches", "cold"]) == 0
    assert store.read(kept)[0]["caches"] == "cold"
    with pytest.raises(SystemExit):
        command.main(["add", str(path), "--record", str(kept), "--caches", "cold"])


# ---- the README row and the results table -----------------------------------------------------------
def test_the_readme_prints_each_peer_beside_our_task_on_the_same_gpu(tmp_path):
    from unilab_bench.results.records import env_record

    ours_h200 = env_record(env_full())
    ours_h100 = env_record({**env_full(env=408000.0), "gpu": "NVIDIA H100 80GB HBM3", "time": "2026-12-06T01:00:00"})
    mjlab = peer_record({**canned(tmp_path), "project": "mjlab", "version": "1.6.0",
                         "task": "Mjlab-Velocity-Flat-Unitree-G1"})
    unilab = peer_record(canned(tmp_path))
    rows = render.readme_rows([ours_h200, mjlab, ours_h100, unilab])
    names = [r[0] for r in rows]
    assert names == ["env step, `g1_walk_flat`", "env step, `g1_walk_flat`",
                     "env step, mjlab 1.6.0 `Mjlab-Velocity-Flat-Unitree-G1`", "env step, unilab-1.5.2 `g1_walk_flat`"]
    assert [r[2] for r in rows] == ["H200", "H100", "H100", "H100"]
    assert rows[3][3] == "200k env-steps/s zero actions, 180k random"
    page = render.render_results([ours_h200, mjlab, unilab])
    assert "### Other projects' G1 envs" in page and "| mjlab 1.6.0 `Mjlab-Velocity-Flat-Unitree-G1` |" in page
    env_table = page.split("## Env throughput")[1].split("### Other projects")[0]
    assert "mjlab" not in env_table  # our env table holds ours alone
    assert "6.67 ms x 3, newton 100/50 iterations" in page


def test_a_peer_without_our_task_on_its_gpu_still_gets_a_row(tmp_path):
    rows = render.readme_rows([peer_record(canned(tmp_path))])
    assert rows == [["env step, unilab-1.5.2 `g1_walk_flat`", "mjwarp, 4096 envs", "H100",
                     "200k env-steps/s zero actions, 180k random"]]
