#!/usr/bin/env bash
# Runs ON the GPU machine, from the project root, in each call that carries a .dev/peers/kN folder.
#   bash .dev/peers/install.sh            stash the carried kN folder(s) in /tmp/peer-stash
#   bash .dev/peers/install.sh install    ... then install every peer whose files are all stashed,
#                                         each into its own /tmp/site-<peer> (once per machine)
# Then: unilab-bench peer --project <peer> --site /tmp/site-<peer> ... (PYTHONPATH is set by the command).
#
# What it writes besides the wheels (the kit's stand-ins, see pack.sh):
#   /tmp/site-mjlab/imageio_ffmpeg/   a stand-in whose get_ffmpeg_exe() names "ffmpeg": mjlab calls it at
#                                     import to point mediapy at the 66 MB binary the real wheel bundles,
#                                     which only writing a video would run.
#   /tmp/site-mjlab/wandb/            a stand-in module: mjlab's task runners `import wandb` at module level
#                                     (importing mjlab.tasks imports them all); only logging a training run
#                                     to Weights & Biases uses it (the real wheel: 20 MB + pydantic, ...).
#   /tmp/site-unilab-1.5.2/unilab/assets/robots/g1/assets/*.STL
#                                     unilab 1.5.2 downloads its G1 meshes from Hugging Face on first use
#                                     (unilab.assets.hub, skipped when robots/g1/assets/head_link.STL
#                                     exists): the same 35 Unitree G1 29-DoF rev 1.0 files, by the same
#                                     names, taken from the mjlab 1.6.0 wheel. They are visual geoms only
#                                     (class "visual": contype 0, conaffinity 0, density 0).
#   /usr/lib/x86_64-linux-gnu/libEGL.so.1 ... (only where ldconfig finds no libEGL.so.1): the glvnd GL
#                                     loaders (libglvnd0 libgl1 libglx0 libopengl0 libegl1 libgles2, no
#                                     Mesa), unpacked into / as the GPU machine's README says to: mjlab sets
#                                     MUJOCO_GL=egl, and mujoco's EGL module fails to import without them.
#   .../robots/g1/textures/floor.png  its other download's completeness marker: an 8x8 grey PNG (no scene
#                                     of the flat task reads it; scene_flat.xml's floor is a builtin checker).
# warp-lang: 1.16.0 for unilab (carried here, split), 1.19.0 for mjlab from our own kit's
# /tmp/stash/warp.xz.a? (.dev/p1 + .dev/p2, stashed by .dev/device-install.sh), or from this kit when
# packed with PEERS_OWN_WARP=1. Each is unpacked and its version checked before it is installed.
#
# PYTHON (default python3), PEERS_DIR (default: this script's folder), PEERS_STASH (/tmp/peer-stash),
# PEERS_SITES (/tmp: sites are $PEERS_SITES/site-<peer>) and OUR_STASH (/tmp/stash) override the paths.
set -euo pipefail
PYTHON=${PYTHON:-python3}
KIT=${PEERS_DIR:-$(cd "$(dirname "$0")" && pwd)}
STASH=${PEERS_STASH:-/tmp/peer-stash}
SITES=${PEERS_SITES:-/tmp}
OUR_STASH=${OUR_STASH:-/tmp/stash}
mkdir -p "$STASH"
for d in "$KIT"/k*; do [[ -d $d ]] && cp -n "$d"/* "$STASH"/ 2>/dev/null || true; done
echo "peers install: $(ls "$STASH" | grep -vc manifest.txt) files stashed in $STASH"
[[ ${1:-} == install ]] || exit 0
[[ -f $STASH/manifest.txt ]] || { echo "peers install: no manifest.txt stashed (carry a .dev/peers/kN folder)"; exit 1; }

warp_into() {  # warp_into SITE VERSION PARTS-GLOB...: unpack a split warp tarball, check its version
  local site=$1 version=$2; shift 2
  local parts=() p
  for p in "$@"; do [[ -f $p ]] && parts+=("$p"); done
  ((${#parts[@]})) || { echo "peers install: no warp $version parts ($*)"; return 1; }
  local tmp; tmp=$(mktemp -d)
  cat "${parts[@]}" | xz -d | tar xf - -C "$tmp"
  grep -q "^version: str = \"$version\"" "$tmp/warp/config.py" \
    || { echo "peers install: the warp in ${parts[*]} is not $version"; rm -rf "$tmp"; return 1; }
  rm -rf "$site/warp" "$site"/warp_lang-*.dist-info
  mv "$tmp/warp" "$tmp"/warp_lang-*.dist-info "$site/"
  rm -rf "$tmp"
}

g1_meshes_into() {  # unilab 1.5.2's G1 meshes and texture marker, from the mjlab wheel
  local g1=$1/unilab/assets/robots/g1
  mkdir -p "$g1/assets" "$g1/textures"
  local wheel; wheel=$(ls "$STASH"/mjlab-1.6.0-*.whl 2>/dev/null | head -1 || true)
  [[ -n $wheel ]] || { echo "peers install: unilab needs the mjlab wheel's G1 meshes: carry its kN folder"; return 1; }
  "$PYTHON" - "$wheel" "$g1" <<'PY'
import struct, sys, zipfile, zlib
from pathlib import Path
wheel, g1 = sys.argv[1], Path(sys.argv[2])
prefix = "mjlab/asset_zoo/robots/unitree_g1/xmls/assets/"
with zipfile.ZipFile(wheel) as zf:
    names = [n for n in zf.namelist() if n.startswith(prefix) and n.endswith(".STL")]
    for name in names:
        (g1 / "assets" / name.removeprefix(prefix)).write_bytes(zf.read(name))
needed = {line.split('file="')[1].split('"')[0] for line in (g1 / "g1.xml").read_text().splitlines() if "<mesh " in line}
missing = sorted(needed - {p.name for p in (g1 / "assets").iterdir()})
if missing:
    sys.exit(f"peers install: the mjlab wheel lacks {missing}, which unilab's g1.xml names")
def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
raw = b"".join(b"\x00" + b"\x80\x80\x80" * 8 for _ in range(8))
png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 8, 8, 8, 2, 0, 0, 0))
       + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
(g1 / "textures" / "floor.png").write_bytes(png)
print(f"peers install: {len(names)} G1 meshes from {Path(wheel).name} (g1.xml names {len(needed)}), floor.png marker")
PY
}

wandb_stand_in() {
  mkdir -p "$1/wandb"
  cat > "$1/wandb/__init__.py" <<'PY'
"""Stand-in for wandb, written by the unilab-bench peer kit (.dev/peers/install.sh).

mjlab 1.6.0's task runners import wandb at module level, and importing mjlab.tasks (the task
registrations) imports every task package; only logging a training run to Weights & Biases uses it.
The real wheel (20 MB, with pydantic and opentelemetry) is left out of the kit.
"""

__version__ = "0.0.0+stand-in"


def __getattr__(name):
    raise AttributeError(f"wandb.{name}: wandb is a stand-in here (the unilab-bench peer kit)")
PY
}

ffmpeg_stand_in() {
  mkdir -p "$1/imageio_ffmpeg"
  cat > "$1/imageio_ffmpeg/__init__.py" <<'PY'
"""Stand-in for imageio-ffmpeg, written by the unilab-bench peer kit (.dev/peers/install.sh).

mjlab 1.6.0 calls get_ffmpeg_exe() at import to point mediapy at the ffmpeg binary the real wheel
bundles (66 MB); only writing a video runs it, and timing an env writes none.
"""

__version__ = "0.0.0+stand-in"


def get_ffmpeg_exe() -> str:
    return "ffmpeg"
PY
}

gl_loaders() {  # mjlab sets MUJOCO_GL=egl: mujoco's EGL module needs libEGL.so.1 to import at all
  if ldconfig -p 2>/dev/null | grep -q 'libEGL.so.1 '; then return 0; fi
  local debs=() f
  while read -r p what file; do [[ $what == gl && -f $STASH/$file ]] && debs+=("$STASH/$file"); done < "$STASH/manifest.txt"
  ((${#debs[@]})) || { echo "peers install: no libEGL.so.1 here and no GL loader .deb stashed"; return 1; }
  for f in "${debs[@]}"; do dpkg -x "$f" /; done
  ldconfig
  echo "peers install: unpacked the GL loaders (glvnd: ${#debs[@]} .deb, no Mesa) into /: mjlab imports mujoco with MUJOCO_GL=egl"
}

status=0
for peer in mjlab unilab-1.5.2; do
  site=$SITES/site-$peer
  if [[ -f $site/.installed ]]; then echo "peers install: $peer already in $site"; continue; fi
  wheels=() missing=()
  while read -r p what rest; do
    [[ $p == "$peer" && $what != warp && $what != gl ]] || continue
    if [[ -f $STASH/$what ]]; then wheels+=("$STASH/$what"); else missing+=("$what"); fi
  done < "$STASH/manifest.txt"
  warp_line=$(awk -v p="$peer" '$1 == p && $2 == "warp" {print $3, $4}' "$STASH/manifest.txt")
  read -r wversion wparts <<< "$warp_line"
  if [[ $wparts == /* ]]; then globs=("$OUR_STASH"/warp.xz.a?); else globs=("$STASH"/warp-"$wversion".xz.a?); fi
  [[ -f ${globs[0]} ]] || missing+=("warp $wversion parts ($wparts)")
  if ((${#missing[@]})); then
    echo "peers install: $peer not installed, missing ${missing[*]}: carry the remaining .dev/peers/kN folders"
    status=1; continue
  fi
  rm -rf "$site" && mkdir -p "$site"
  "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$site" "${wheels[@]}"
  warp_into "$site" "$wversion" "${globs[@]}"
  if [[ $peer == mjlab ]]; then ffmpeg_stand_in "$site"; wandb_stand_in "$site"; gl_loaders; else g1_meshes_into "$site"; fi
  touch "$site/.installed"
  echo "peers install: $peer installed into $site (${#wheels[@]} wheels, warp $wversion)"
done
exit $status
