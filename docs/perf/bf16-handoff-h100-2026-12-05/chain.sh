#!/usr/bin/env bash
# On the device: run each job of JOBS (name<TAB>tree<TAB>command) alone, one after the other.
JOBS=$1
while IFS=$'\t' read -r name tree cmd; do
  [[ -z $name || $name == \#* ]] && continue
  mkdir -p /tmp/res/$name
  echo "$(date +%T) start $name ($tree)"
  ( cd $tree && export PYTHONPATH=/tmp/site:/tmp/gsite:$tree/unisim-core/src:$tree/unilab/src:$tree/unilab_rl/src \
      PYGLET_HEADLESS=1 UNILAB_MOTION_DIR=/tmp/s/motions R=/tmp/res/$name && \
    echo "$cmd" > $R/command.txt && timeout 900 bash -c "$cmd" > $R/log.txt 2>&1 )
  rc=$?
  echo "$(date +%T) end $name rc=$rc"
done < "$JOBS"
echo "chain done"
