#!/usr/bin/env bash
# On the device: wait up to $1 s for the chain to finish, then pack the results into $OUT.
end=$((SECONDS + $1))
while (( SECONDS < end )) && ! grep -q "chain done" /tmp/res/chain.out 2>/dev/null; do sleep 5; done
tail -25 /tmp/res/chain.out
tar czf $OUT/res.tgz -C /tmp res
