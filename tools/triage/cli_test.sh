#!/usr/bin/env bash
# End-to-end tests of `evenkeel triage` on the fixtures in testdata/triage/:
# exit statuses, --json, calibrate -> --profile FILE, live nvidia-smi (a fake
# child), live Prometheus (a python3 HTTP server), and NVML unavailable.
#   tools/triage/cli_test.sh path/to/evenkeel
set -u
EK=${1:?usage: cli_test.sh path/to/evenkeel}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
T=$ROOT/testdata/triage
TMP=$(mktemp -d)
trap 'kill $SERVER 2>/dev/null; rm -rf "$TMP"' EXIT
SERVER=
failures=0

check() {  # check NAME EXPECTED_EXIT ACTUAL_EXIT
  if [ "$2" != "$3" ]; then
    echo "FAIL $1: exit $3, expected $2" >&2
    failures=$((failures + 1))
  else
    echo "ok   $1"
  fi
}
expect_grep() {  # expect_grep NAME PATTERN FILE
  if grep -q -- "$2" "$3"; then echo "ok   $1"; else
    echo "FAIL $1: no '$2' in $3:" >&2; head -5 "$3" >&2; failures=$((failures + 1)); fi
}

# Exit status is the last window's verdict.
for case in healthy:0 checkpoint:10 idle:12 communication:13 starvation:14 deadlock:15 \
            healthy_deadlock:15 healthy_checkpoint_healthy:0 missing_host:16; do
  name=${case%%:*}
  "$EK" triage --source replay "$T/$name"/*.csv >"$TMP/$name.out" 2>"$TMP/$name.err"
  check "replay $name" "${case##*:}" $?
done
check "one line per window" 71 "$(wc -l <"$TMP/healthy_deadlock.out")"
expect_grep "deadlock line" "10:00:31.000Z  DEADLOCK_SUSPECT .*rank 3 at" "$TMP/healthy_deadlock.out"
"$EK" triage "$T/checkpoint"/*.csv --checkpoint-s 10 >/dev/null
check "checkpoint past 3x plan" 11 $?

# --json: one object per window with time, verdict, ranks, reason.
"$EK" triage --json --source replay "$T/healthy_deadlock"/*.csv >"$TMP/j.out"
check "json exit" 15 $?
python3 - "$TMP/j.out" <<'PY' || failures=$((failures + 1))
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert len(rows) == 71, len(rows)
d = [r for r in rows if r["verdict"] == "DEADLOCK_SUSPECT"]
assert d[0]["time_utc"] == "2026-11-29T10:00:31.000Z", d[0]
assert d[0]["ranks"] == [3] and d[0]["gpus"] == ["node-a:3"], d[0]
assert all(k in d[0] for k in ("time", "reason", "band", "duration_s")), d[0]
assert not any(r["verdict"] == "DEADLOCK_SUSPECT" for r in rows[:29])
print("ok   json timeline")
PY

# A run file sets host order (node-b first: rank 3 of node-a becomes rank 11),
# GPUs per node, and the planned checkpoint time (the bf16 weights' 65.5 GB and the training
# state's 393 GB, 12 B/param, at 0.5 GB/s = 917 s).
cat >"$TMP/run.toml" <<'TOML'
[cluster]
nodes = 2
gpus_per_node = 8
hosts = ["node-b", "node-a"]
[model]
params = 32.76e9
[checkpoint]
write_gbps = 0.5
TOML
"$EK" triage --json --run "$TMP/run.toml" "$T/healthy_deadlock"/*.csv >"$TMP/run.out"
check "run file exit" 15 $?
expect_grep "run file host order" '"ranks":\[11\],"rank_ranges":"11","gpus":\["node-a:3"\]' "$TMP/run.out"
sed 's/\["node-b", "node-a"\]/["node-a", "node-b"]/' "$TMP/run.toml" >"$TMP/run2.toml"
"$EK" triage --run "$TMP/run2.toml" "$T/healthy_checkpoint_healthy"/*.csv >"$TMP/runck.out"
check "run file checkpoint exit" 0 $?
expect_grep "run file checkpoint plan" "CHECKPOINT .*planned 15m17s" "$TMP/runck.out"

# Bad input: warnings name file and line on stderr; never a crash.
"$EK" triage "$T/bad_input"/*.csv >"$TMP/bad.out" 2>"$TMP/bad.err"
check "bad input exit" 15 $?
expect_grep "bad input warning" "evenkeel: warning: node-a.csv:[0-9]*: power W -12 is outside" "$TMP/bad.err"
printf '\x00\x01garbage\nmore, garbage\n' >"$TMP/junk.csv"
"$EK" triage "$TMP/junk.csv" >"$TMP/junk.out" 2>"$TMP/junk.err"
check "a file with no usable sample is bad input, not a verdict" 65 $?
expect_grep "no usable sample names the file" "evenkeel: error: .*junk.csv" "$TMP/junk.err"

# Calibrate a profile from the healthy and idle fixtures, then use it.
"$EK" triage calibrate --source replay "$T/healthy"/*.csv --idle "$T/idle"/*.csv \
  --name mine -o "$TMP/mine.json" >"$TMP/cal.out"
check "calibrate" 0 $?
expect_grep "calibrated profile file" '"name": "mine"' "$TMP/mine.json"
"$EK" triage --profile "$TMP/mine.json" "$T/healthy_checkpoint_healthy"/*.csv >/dev/null
check "--profile FILE" 0 $?
"$EK" triage calibrate "$T/starvation"/*.csv -o "$TMP/bad.json" 2>"$TMP/cal.err"
check "calibrate refuses a starved window (bad input)" 65 $?
expect_grep "calibrate says why" "not steady training" "$TMP/cal.err"
"$EK" triage --profile H100 "$T/healthy"/*.csv >/dev/null
check "B300 watts on an H100 profile are not 'healthy' by magic" 16 $?

# Errors and usage.
"$EK" triage --source nvml --nvml-library /nonexistent/libnvidia-ml.so.1 2>"$TMP/nvml.err"
check "nvml unavailable (unavailable)" 69 $?
expect_grep "nvml message" "evenkeel: error: triage: NVML unavailable" "$TMP/nvml.err"
"$EK" triage --source nvidia-smi --nvidia-smi /nonexistent/nvidia-smi 2>/dev/null
check "nvidia-smi missing (unavailable)" 69 $?
"$EK" triage --source nvidia-smi --nvidia-smi false 2>"$TMP/false.err"
check "nvidia-smi failing (unavailable)" 69 $?
expect_grep "nvidia-smi failing says so" "nvidia-smi exited with status 1" "$TMP/false.err"
"$EK" triage --source prometheus node-a:9400 http://node-a:9400/metrics 2>"$TMP/dup.err"
check "same node twice (bad input)" 65 $?
"$EK" triage --bogus 2>/dev/null
check "usage" 2 $?

# Live nvidia-smi: a fake child in the deadlock shape, until it exits.
ROUNDS=4 "$EK" triage --follow --source nvidia-smi --nvidia-smi "$ROOT/tools/triage/fake_nvidia_smi.sh" \
  >"$TMP/live.out"
check "live nvidia-smi deadlock" 15 $?
expect_grep "live deadlock names GPU 3" "DEADLOCK_SUSPECT.*rank 3 at" "$TMP/live.out"

# Live Prometheus: dcgm-exporter text from a python3 HTTP server, 2 nodes at once.
mkdir -p "$TMP/www"
for g in 0 1; do
  echo "DCGM_FI_DEV_GPU_UTIL{gpu=\"$g\",Hostname=\"n\"} 100"
  echo "DCGM_FI_DEV_POWER_USAGE{gpu=\"$g\",Hostname=\"n\"} 640.5"
  echo "DCGM_FI_DEV_FB_USED{gpu=\"$g\",Hostname=\"n\"} 81000"
done >"$TMP/www/metrics"
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
python3 -m http.server "$PORT" --bind 127.0.0.1 --directory "$TMP/www" >/dev/null 2>&1 &
SERVER=$!
python3 - "$PORT" <<'PY'
import sys, time, urllib.request
for _ in range(100):
    try:
        urllib.request.urlopen("http://127.0.0.1:%s/metrics" % sys.argv[1], timeout=1).read()
        break
    except OSError:
        time.sleep(0.1)
PY
"$EK" triage --json --windows 3 --source prometheus "127.0.0.1:$PORT" \
  "http://localhost:$PORT/metrics" >"$TMP/prom.out"
check "live prometheus communication-bound" 13 $?
expect_grep "prometheus ranks" '"verdict":"COMMUNICATION"' "$TMP/prom.out"

if [ "$failures" -ne 0 ]; then echo "$failures failure(s)" >&2; exit 1; fi
echo "all triage CLI checks passed"
