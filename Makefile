# UniLab workspace. Two commands set up a fresh machine: `make install`, then `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
TORCH ?= torch==2.13.0
BACKEND ?= mujoco
DEVICE ?= cpu
NUM_ENVS ?= 4
PYTEST := $(PY) -m pytest -q -p no:cacheprovider
# pytest exits 5 when a selection collects nothing; that is not a failure of the suite.
ALLOW_EMPTY := ; rc=$$?; [ $$rc -eq 0 ] || [ $$rc -eq 5 ] || exit $$rc

.PHONY: install check test test-all conformance bench g1-scene
G1_SCENE = $$($(PY) -c "from unilab.assets import g1_scene_path; print(g1_scene_path())")

install:
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "$(TORCH)"
	$(PY) -m pip install -q -e "./unisim-core[sim]" -e ./unilab -e "./unilab_rl[cli,export,ppo]" -e ./bench -e ./ci -r requirements-dev.txt
	$(VENV)/bin/unilab-fetch-assets
	$(VENV)/bin/unilab-motion fetch

g1-scene:
	@echo $(G1_SCENE)

check:
	$(VENV)/bin/lint-imports
	$(VENV)/bin/ruff check unisim-core unilab unilab_rl bench ci
	$(PY) -m unilab_gates.manifests
	$(PY) -m unilab_gates.task_records

test:
	$(PYTEST) -m "not slow" unisim-core/tests unilab/tests unilab_rl/tests bench/tests ci/tests $(ALLOW_EMPTY)
	$(MAKE) conformance BACKEND=mujoco,mjwarp,genesis DEVICE=cpu

test-all:
	UNISIM_G1_SCENE=$(G1_SCENE) $(PYTEST) unisim-core/tests unilab/tests unilab_rl/tests bench/tests ci/tests $(ALLOW_EMPTY)
	$(MAKE) conformance BACKEND=mujoco,mjwarp,genesis DEVICE=cpu

conformance:
	$(PYTEST) --pyargs unisim.conformance --unisim-backend $(BACKEND) --unisim-device $(DEVICE) \
		--unisim-num-envs $(NUM_ENVS) --unisim-model builtin,$(G1_SCENE)

# CPU by default; DEVICE=cuda runs the GPU benchmarks (mjwarp/genesis adapters, env and collector on mjwarp).
# Each benchmark's JSON goes under $(BENCH_OUT) (not committed); the env and collector benchmarks also
# append their compact record to the results store $(RECORD) (docs/benchmarks.md).
BENCH_OUT ?= runs/bench
RECORD ?= results/records.jsonl
bench:
ifeq ($(DEVICE),cuda)
	$(VENV)/bin/unilab-bench backend --model $(G1_SCENE) --device cuda --envs 1024,4096,8192 \
		--genesis-envs 1024,4096,8192 --out $(BENCH_OUT)/backend-cuda.json
	$(VENV)/bin/unilab-bench env --backend mjwarp --num-envs 4096 --device cuda --gap-rows \
		--compare-task g1_walk_flat --compare-override cuda_graph=true --out $(BENCH_OUT)/env-mjwarp-4096.json \
		--record $(RECORD)
	for algo in flashsac fastsac; do $(VENV)/bin/unilab-bench collector --backend mjwarp --num-envs 4096 \
		--device cuda --algo $$algo --preset gpu_walk replay_capacity_per_env=64 \
		--json $(BENCH_OUT)/collector-$$algo-mjwarp-4096.json --record $(RECORD) || exit 1; done
else
	$(VENV)/bin/unilab-bench backend-host --model $(G1_SCENE) --num-envs 64,1024 --out $(BENCH_OUT)/backend-mujoco.json
	$(VENV)/bin/unilab-bench env --backend mujoco --num-envs 1024 --gap-rows --out $(BENCH_OUT)/env-mujoco-1024.json \
		--record $(RECORD)
endif
