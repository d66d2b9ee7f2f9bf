#!/usr/bin/env bash
# On the device: lay out trees, assets and results folders under /tmp.
set -e
mkdir -p /tmp/res /tmp/s /tmp/base
cp -r .dev/s/. /tmp/s/
rm -rf /tmp/tree && mkdir -p /tmp/tree && cp -r unisim-core unilab unilab_rl workspace.toml /tmp/tree/
[[ -d .dev/base ]] && cp -r .dev/base/. /tmp/base/
if [[ -f .dev/assets/assets.tar.xz ]]; then
  mkdir -p ~/.cache/unilab/assets/mjlab-1.6.0 && tar xJf .dev/assets/assets.tar.xz -C ~/.cache/unilab/assets/mjlab-1.6.0
fi
if [[ -f .dev/assets/motions.tar.xz ]]; then mkdir -p /tmp/s/motions && tar xJf .dev/assets/motions.tar.xz -C /tmp/s/motions; fi
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv > /tmp/res/gpu.txt
echo "setup done: $(ls /tmp/base) ; assets $(ls ~/.cache/unilab/assets/mjlab-1.6.0 | head -3)"
