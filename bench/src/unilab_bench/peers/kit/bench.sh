#!/usr/bin/env bash
# Runs ON the GPU machine, from the project root, after our kit (.dev/device-install.sh install) and the
# peers' kit (.dev/peers/install.sh install) are installed. Times, one after another in the background
# (one call runs at most 10 min): mjlab's and unilab 1.5.2's own G1 envs (unilab-bench peer) and ours
# (unilab-bench env, the command of the H100/H200 records already in the store), all on this GPU
# with the same steps, samples and warm-up; then copies whatever has finished to $OUT.
# Call it again in the next run (nothing to carry) to wait for the rest; it starts nothing twice.
#   bash bench/src/unilab_bench/peers/kit/bench.sh [WAIT_S]     (default 540: wait at most that long)
#   PEER_ENVS=4096 PEER_STEPS=200 PEER_SAMPLES=5 PEER_WARMUP=50 PEER_ONLY=1 (skip ours) override.
set -uo pipefail
WAIT=${1:-540}
RES=/tmp/peer-bench
ENVS=${PEER_ENVS:-4096} STEPS=${PEER_STEPS:-200} SAMPLES=${PEER_SAMPLES:-5} WARMUP=${PEER_WARMUP:-50}
ROOT=$(pwd)
mkdir -p "$RES"
if [[ ! -f $RES/started ]]; then
  touch "$RES/started"
  # our sources and simulators (the peers' driver gets its own PYTHONPATH from unilab-bench peer);
  # our G1 robot files are the pinned mjlab 1.6.0 wheel's (unilab.assets.robot_files), the same wheel
  # the peers' kit carries: copied out of its site, since our scene is written beside them
  export PYTHONPATH=/tmp/site:$ROOT/unisim-core/src:$ROOT/unilab/src:$ROOT/unilab_rl/src:$ROOT/bench/src
  mkdir -p /tmp/unilab-assets && cp -rn /tmp/site-mjlab/mjlab/asset_zoo/robots/unitree_g1 /tmp/unilab-assets/
  export UNILAB_ASSET_DIR=/tmp/unilab-assets PYTHONUNBUFFERED=1
  common=(--num-envs "$ENVS" --device cuda --steps "$STEPS" --samples "$SAMPLES" --warmup "$WARMUP")
  ours=(python3 -m unilab_bench.env_step --backend mjwarp --task g1_walk_flat --compare-task g1_walk_flat
        --compare-override cuda_graph=true --gap-rows "${common[@]}" --out "$RES/ours-g1_walk_flat.json")
  setsid nohup bash -c "
    python3 -m unilab_bench.cli peer --project mjlab --site /tmp/site-mjlab ${common[*]} \
      --out $RES/peer-mjlab.json > $RES/peer-mjlab.log 2>&1
    python3 -m unilab_bench.cli peer --project unilab-1.5.2 --site /tmp/site-unilab-1.5.2 ${common[*]} \
      --out $RES/peer-unilab-1.5.2.json > $RES/peer-unilab-1.5.2.log 2>&1
    [[ \${PEER_ONLY:-0} == 1 ]] || ${ours[*]} > $RES/ours-g1_walk_flat.log 2>&1
    touch $RES/done" > "$RES/all.log" 2>&1 < /dev/null &
  echo "bench: started (logs in $RES)"
fi
for ((t = 0; t < WAIT; t += 5)); do [[ -f $RES/done ]] && break; sleep 5; done
nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv,noheader 2>/dev/null || true
for f in "$RES"/*.log; do echo "== $f"; tail -n 6 "$f"; done
cp "$RES"/*.json "$RES"/*.log "${OUT:-/tmp/peer-bench-out}/" 2>/dev/null || true
if [[ -f $RES/done ]]; then echo "bench: done"; else echo "bench: still running; call again to wait"; fi
