#!/bin/sh
# Stands in for `nvidia-smi --query-gpu=... --format=csv -l 1` in
# tools/triage/cli_test.sh: 8 GPUs in the report's deadlock shape (GPU 3 at 0%,
# the rest at 100%, power floored), one round a second, ROUNDS rounds (default 4).
echo "timestamp, index, utilization.gpu [%], power.draw [W], memory.used [MiB]"
n=0
while [ "$n" -lt "${ROUNDS:-4}" ]; do
  for g in 0 1 2 3 4 5 6 7; do
    u=100; [ "$g" = 3 ] && u=0
    echo "$(date '+%Y/%m/%d %H:%M:%S.000'), $g, $u %, 19$g.00 W, 83968 MiB"
  done
  n=$((n + 1))
  sleep 1
done
