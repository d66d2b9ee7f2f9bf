#!/usr/bin/env bash
# Pack the device kit of `unilab-bench peer` into .dev/peers/ (ignored by git: never commit it):
# the cp312 manylinux x86_64 wheels each peer imports on its env-stepping path, minus what the GPU
# machine already has (torch, numpy, scipy, matplotlib, rich, tensorboard, onnx, absl-py, etils, ...:
# /work/.library/device/KINDS.md's package list), in carry folders k1, k2, ... of at most 58 MB each,
# plus install.sh and README.md. Each folder holds manifest.txt (which wheel goes to which peer).
#
# Usage, from the project root:   bash bench/src/unilab_bench/peers/kit/pack.sh
#   PYTHON=python3                 the interpreter whose pip downloads (any version: wheels are cp312)
#   UNILAB_PEERS_CACHE=DIR         the download cache (default ~/.cache/unilab-peers)
#   PEERS_OUT=DIR                  where the kit goes (default .dev/peers; emptied first)
#   PEERS_PYTHON_VERSION=3.11      wheels for another Python (a CPU check on a machine without 3.12)
#   PEERS_CPU_CHECK=1              add mjbatch-uni (unilab 1.5.2's MuJoCo CPU backend: its mjwarp one
#                                  refuses a CPU device), for that CPU check only
#   PEERS_OWN_WARP=1               also carry warp-lang 1.19.0 for mjlab (two more folders) instead of
#                                  taking it from our own env's wheel kit (.dev/p1 + .dev/p2),
#                                  which the same session carries for our env anyway
# NOTE: a packer that empties .dev/ for our own env's wheels runs first, then this (cached: seconds).
#
# Left out on purpose (not imported on the env-stepping path, or imported only if present):
#   cffi (glfw imports it in try/except ImportError), torchrunx, onnxscript, lark, huggingface_hub
#   (unilab: only to download assets, which the kit provides), mjbatch-uni (unilab's MuJoCo CPU
#   backend, not the mjwarp one timed on the GPU).
# Stand-ins that install.sh writes (documented there): wandb (mjlab's task runners import it at module
# level; only W&B logging uses it; the real wheel is 20 MB with pydantic and opentelemetry),
# imageio_ffmpeg (mjlab calls
# imageio_ffmpeg.get_ffmpeg_exe() at import to point mediapy at a bundled 66 MB ffmpeg binary, used
# only to write videos), unilab's G1 meshes (fetched from Hugging Face at first use: the same
# Unitree G1 29-DoF rev 1.0 STL files ship in the mjlab 1.6.0 wheel) and its floor.png marker.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
PYTHON=${PYTHON:-python3}
PYV=${PEERS_PYTHON_VERSION:-3.12}
ROOT=${UNILAB_PEERS_CACHE:-$HOME/.cache/unilab-peers}
CACHE=$ROOT/cp${PYV/./}   # wheels per Python version; warp (py3-none) once, in $ROOT
OUT=${PEERS_OUT:-.dev/peers}
[[ -n $OUT && $OUT != / ]] || { echo "pack: PEERS_OUT must name a folder" >&2; exit 1; }
PLAT=(--only-binary=:all: --python-version "$PYV" --implementation cp
      --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64
      --platform manylinux2014_x86_64 --platform manylinux_2_5_x86_64 --platform manylinux1_x86_64)
SHARED="mujoco==3.11.0 mujoco-warp==3.11.0 prettytable==3.19.0 wcwidth==0.9.5 glfw==2.11.0 PyOpenGL==3.1.10"
MJLAB="mjlab==1.6.0 tyro==1.0.17 docstring-parser==0.18.0 mediapy==1.2.7 ipython==9.19.1 traitlets==5.16.1
 rsl-rl-lib==5.4.2 tensordict==0.15.3 pyvers==0.2.3 GitPython==3.2.1 gitdb==4.0.12 smmap==5.0.3 trimesh==5.2.0
 viser==1.1.1 mjviser==0.0.14 msgspec==0.23.0 websockets==16.1.1 zstandard==0.25.0"
UNILAB="unilab==1.5.2 unisim-core==2.2.0 hydra-core==1.3.8 omegaconf==2.3.1 gymnasium==1.4.0
 Farama-Notifications==0.0.6"
[[ ${PEERS_CPU_CHECK:-0} == 1 ]] && UNILAB="$UNILAB mjbatch-uni==0.2.5"
SDIST_ONLY="antlr4-python3-runtime==4.9.3"   # hydra's parser runtime: PyPI has no wheel, built here (pure Python)
WARP_UNILAB=1.16.0   # unisim-core 2.2.0[mjwarp] pins warp-lang==1.16.0
WARP_MJLAB=1.19.0    # what `pip install mjlab==1.6.0` resolves (warp-lang>=1.14): the newest

mkdir -p "$CACHE/whl"
fetch() {  # download the named wheels into the cache (once); print their file names
  local spec tmp file
  mkdir -p "$CACHE/names"
  for spec in "$@"; do
    file=$(cat "$CACHE/names/$spec" 2>/dev/null || true)
    if [[ -z $file || ! -f $CACHE/whl/$file ]]; then
      tmp=$(mktemp -d)
      "$PYTHON" -m pip download -q --no-deps "${PLAT[@]}" -d "$tmp" "$spec" >/dev/null 2>&1 \
        || { echo "pack: pip found no cp${PYV/./} manylinux x86_64 wheel of $spec" >&2; exit 1; }
      file=$(ls "$tmp"); mv -f "$tmp/$file" "$CACHE/whl/"; rmdir "$tmp"
      echo "$file" > "$CACHE/names/$spec"
    fi
    echo "$file"
  done
}
sdist_wheel() {  # a pure-Python wheel built from the sdist (once); print its file name
  local spec=$1 tmp file
  file=$(cat "$CACHE/names/$spec" 2>/dev/null || true)
  if [[ -z $file || ! -f $CACHE/whl/$file ]]; then
    tmp=$(mktemp -d)
    "$PYTHON" -m pip wheel -q --no-deps -w "$tmp" "$spec" >/dev/null 2>&1 \
      || { echo "pack: could not build a wheel of $spec" >&2; exit 1; }
    file=$(ls "$tmp"); mv -f "$tmp/$file" "$CACHE/whl/"; rmdir "$tmp"
    echo "$file" > "$CACHE/names/$spec"
  fi
  echo "$file"
}
warp_xz() {  # warp-lang VERSION unpacked, its examples dropped, recompressed with xz (as our own kit does)
  local version=$1 xzf=$ROOT/warp-$1.tar.xz
  if [[ ! -f $xzf ]]; then
    local wheel tmp
    wheel=$(fetch "warp-lang==$version")
    tmp=$(mktemp -d)
    (cd "$tmp" && unzip -q "$CACHE/whl/$wheel" && rm -rf warp/examples && tar cf - . | xz -T0 -6 > "$xzf.part")
    mv "$xzf.part" "$xzf"; rm -rf "$tmp"
  fi
  echo "$xzf"
}

# (each list assigned first: a failed download then stops the script)
shared=$(fetch $SHARED); mjlab=$(fetch $MJLAB); unilab=$(fetch $UNILAB); antlr=$(sdist_wheel $SDIST_ONLY)
xz116=$(warp_xz $WARP_UNILAB)
# The GL loader libraries (glvnd, no Mesa): mjlab sets MUJOCO_GL=egl before importing mujoco, whose
# EGL module then needs libEGL.so.1 to import at all (the GPU machine has none); install.sh unpacks them
# into / only where ldconfig finds no libEGL.so.1, as the machine's README says to for the loaders.
GL_DEBS="libglvnd0 libgl1 libglx0 libopengl0 libegl1 libgles2"
if [[ ! -f $ROOT/gl/.done ]]; then
  o=(-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64-lists)
  mkdir -p /tmp/amd64-lists/partial "$ROOT/gl"; apt-get "${o[@]}" update -qq
  (cd "$ROOT/gl" && apt-get "${o[@]}" download -qq $GL_DEBS >/dev/null 2>&1) && touch "$ROOT/gl/.done"
fi
manifest=$(mktemp)
for f in $(cd "$ROOT/gl" && ls *.deb); do echo "mjlab gl $f" >> "$manifest"; done
for f in $shared; do echo "mjlab $f" >> "$manifest"; echo "unilab-1.5.2 $f" >> "$manifest"; done
for f in $mjlab; do echo "mjlab $f" >> "$manifest"; done
for f in $unilab $antlr; do echo "unilab-1.5.2 $f" >> "$manifest"; done
echo "unilab-1.5.2 warp $WARP_UNILAB warp-$WARP_UNILAB.xz.a?" >> "$manifest"
rm -rf "$CACHE/parts" && mkdir -p "$CACHE/parts"
split -b 55000000 "$xz116" "$CACHE/parts/warp-$WARP_UNILAB.xz."
if [[ ${PEERS_OWN_WARP:-0} == 1 ]]; then
  cached=$HOME/.cache/unilab-device/warp-$WARP_MJLAB.tar.xz   # our own kit's, if made
  if [[ -f $cached ]]; then xz119=$cached; else xz119=$(warp_xz $WARP_MJLAB); fi
  split -b 55000000 "$xz119" "$CACHE/parts/warp-$WARP_MJLAB.xz."
  echo "mjlab warp $WARP_MJLAB warp-$WARP_MJLAB.xz.a?" >> "$manifest"
else
  echo "mjlab warp $WARP_MJLAB /tmp/stash/warp.xz.a? (our env's wheel kit: .dev/p1 + .dev/p2)" >> "$manifest"
fi

rm -rf "$OUT" && mkdir -p "$OUT"
if [[ $OUT == .dev/* ]]; then grep -qx '/.dev/' .git/info/exclude 2>/dev/null || echo '/.dev/' >> .git/info/exclude; fi
# first-fit decreasing into folders of at most 58 MB (the tracked tree travels beside each: ~3 MB)
"$PYTHON" - "$CACHE" "$manifest" "$OUT" "$ROOT" <<'PY'
import os, shutil, sys
cache, manifest, out, root = sys.argv[1:5]
names = set()
for line in open(manifest):
    peer, what, *rest = line.split()
    if what == "gl":
        names.add(os.path.join(root, "gl", rest[0]))
    elif what != "warp":
        names.add(os.path.join(cache, "whl", what))
files = sorted([*names, *(os.path.join(cache, "parts", p) for p in os.listdir(os.path.join(cache, "parts")))],
               key=os.path.getsize, reverse=True)
bins = []
for f in files:
    size = os.path.getsize(f)
    for b in bins:
        if b[0] + size <= 58e6:
            b[0] += size; b[1].append(f); break
    else:
        bins.append([size, [f]])
for i, (_, fs) in enumerate(bins, 1):
    os.makedirs(f"{out}/k{i}", exist_ok=True)
    for f in fs:
        shutil.copy(f, f"{out}/k{i}/")
    shutil.copy(manifest, f"{out}/k{i}/manifest.txt")
PY
cp "$HERE/install.sh" "$HERE/README.md" "$OUT/"
rm -f "$manifest"
du -sh "$OUT"/k*
