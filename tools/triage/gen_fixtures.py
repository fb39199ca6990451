#!/usr/bin/env python3
"""Generates the triage fixtures in testdata/triage/ (deterministic: fixed seeds).

16 ranks on 2 nodes (node-a: ranks 0-7, node-b: ranks 8-15), sampled once a
second like `nvidia-smi --query-gpu=timestamp,index,utilization.gpu,power.draw,
memory.used --format=csv -l 1`, with the field report's B300 numbers (docs/triage.md):
healthy ~940-1040 W with every rank at 100%; communication-bound ~640 W, all
busy; input-starved ~575 W with rank-to-rank utilization scatter; floor ~190 W
for a checkpoint (rank 0 alone at 0%) or a deadlock (rank 3 at 0%, the rest
pinned at 100%, as in the report's deadlock). node-b samples 0.25 s after
node-a, as two unsynchronised samplers would.

Each scenario is a folder; src/triage/fixtures_test.cc asserts the verdict
timeline of each, so change the two together. Run from the repository root:

    python3 tools/triage/gen_fixtures.py [--out testdata/triage]
"""

import argparse
import datetime
import os
import random

T0 = datetime.datetime(2026, 11, 29, 10, 0, 0)
GPUS = 8
HOSTS = ["node-a", "node-b"]
PHASE = {"node-a": 0.0, "node-b": 0.25}
HEADER = "timestamp, index, utilization.gpu [%], power.draw [W], memory.used [MiB]"
HOST_HEADER = "host, " + HEADER
MEM_MIB = 83968  # 82 GB live per GPU (the field report's run)


def stamp(t):
    d = T0 + datetime.timedelta(seconds=t)
    return d.strftime("%Y/%m/%d %H:%M:%S.") + "%03d" % (d.microsecond // 1000)


# ---- per-state readings: (util %, power W) for one rank at one sample -------

def healthy(rng, rank, sd=15.0):
    util = 100 if rng.random() < 0.9 else rng.choice([98, 99])
    return util, min(1035.0, max(945.0, rng.gauss(990, sd)))


def checkpoint(rng, rank):
    return (0, rng.gauss(196, 4)) if rank == 0 else (100, rng.gauss(190, 3))


def deadlock(rng, rank, stuck=3):
    return (0, rng.gauss(187, 3)) if rank == stuck else (100, rng.gauss(191, 3))


def starvation(rng, rank):
    # The bottleneck is upstream: about half the ranks wait for data each second.
    util = rng.randint(20, 60) if rng.random() < 0.5 else rng.randint(90, 100)
    return util, rng.gauss(575, 15)


def communication(rng, rank):
    return 100, rng.gauss(640, 10)


def idle(rng, rank):
    return 0, rng.gauss(140, 4)


def ramp(shape, power):
    """One sample while power falls or rises: the next state's shape, mid power."""
    def reading(rng, rank):
        util, _ = shape(rng, rank)
        return util, rng.gauss(power, 10)
    return reading


# ---- writers ------------------------------------------------------------------

def row(t, gpu, util, power, units=True):
    if units:
        return "%s, %d, %d %%, %.2f W, %d MiB" % (stamp(t), gpu, util, power, MEM_MIB)
    return "%s, %d, %d, %.2f, %d" % (stamp(t), gpu, util, power, MEM_MIB)


def timeline(phases):
    """[(seconds, state)] -> state per second."""
    out = []
    for n, state in phases:
        out += [state] * n
    return out


def host_rows(rng, host, states, units=True, skip=()):
    rows = []
    base = HOSTS.index(host) * GPUS
    for t, state in enumerate(states):
        if t in skip:
            continue
        for g in range(GPUS):
            util, power = state(rng, base + g)
            rows.append(row(t + PHASE[host], g, util, power, units))
    return rows


def write(path, lines):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    size = os.path.getsize(path)
    assert size < 100 * 1024, "%s is %d bytes; fixtures stay under 100 KB" % (path, size)


def per_host(out, name, seed, states, header=HEADER, units=True, skip=None):
    rng = random.Random(seed)
    for host in HOSTS:
        rows = host_rows(rng, host, states, units, (skip or {}).get(host, ()))
        write(os.path.join(out, name, host + ".csv"), ([header] if header else []) + rows)


# ---- scenarios ------------------------------------------------------------------

def single_states(out):
    per_host(out, "healthy", 1, timeline([(60, healthy)]))
    # csv,nounits: the header keeps its [units], the values lose them.
    per_host(out, "checkpoint", 2, timeline([(60, checkpoint)]), units=False)
    per_host(out, "starvation", 4, timeline([(60, starvation)]), header=None)
    per_host(out, "communication", 5, timeline([(60, communication)]))
    # One file with a host column, rows of both hosts interleaved by time.
    rng = random.Random(3)
    states = timeline([(60, deadlock)])
    rows = []
    for t, state in enumerate(states):
        for host in HOSTS:
            base = HOSTS.index(host) * GPUS
            for g in range(GPUS):
                util, power = state(rng, base + g)
                rows.append(host + ", " + row(t + PHASE[host], g, util, power))
    write(os.path.join(out, "deadlock", "trace.csv"), [HOST_HEADER] + rows)
    # The field report's own query: no timestamp column; rows are timed by rounds.
    rng = random.Random(6)
    for host in HOSTS:
        rows = []
        for t in range(30):
            for g in range(GPUS):
                util, power = idle(rng, g)
                rows.append("%d, %d %%, %.2f W, 2 MiB" % (g, util, power))
        write(os.path.join(out, "idle", host + ".csv"),
              ["index, utilization.gpu [%], power.draw [W], memory.used [MiB]"] + rows)


def transitions(out):
    # Checkpoint: in the field report, rank 0 writes ~62 GB to NFS, the others resume in ~2 min.
    per_host(out, "healthy_checkpoint_healthy", 7, timeline([
        (20, healthy), (1, ramp(checkpoint, 520)), (100, checkpoint),
        (1, ramp(healthy, 600)), (20, healthy)]))
    per_host(out, "healthy_deadlock", 8, timeline([
        (30, healthy), (1, ramp(deadlock, 480)), (40, deadlock)]))
    per_host(out, "healthy_starvation", 9, timeline([
        (30, healthy), (1, ramp(starvation, 780)), (40, starvation)]))


def faults(out):
    noisy = lambda rng, rank: healthy(rng, rank, sd=30.0)
    rng = random.Random(10)
    for host in HOSTS:
        rows = host_rows(rng, host, timeline([(90, noisy)]))
        # Sensor hiccups: about 1 field in 100 reads [N/A] or [Not Supported].
        for i, r in enumerate(rows):
            if rng.random() < 0.02:
                f = r.split(", ")
                f[rng.choice([2, 3])] = rng.choice(["[N/A]", "[Not Supported]"])
                rows[i] = ", ".join(f)
        write(os.path.join(out, "noise", host + ".csv"), [HEADER] + rows)

    # node-b's exporter dies after t=30.
    per_host(out, "missing_host", 11, timeline([(60, healthy)]),
             skip={"node-b": range(31, 60)})

    # node-b's sampler stalls: 2 s (within the 3 s staleness) at t=20-21 and
    # 5 s (beyond it) at t=40-44. node-a's GPU 5 writes its t=30 row late,
    # after the other GPUs' t=31 rows.
    rng = random.Random(12)
    states = timeline([(60, healthy)])
    a = host_rows(rng, "node-a", states)
    late = a.pop(30 * GPUS + 5)
    a.insert(31 * GPUS + 4, late)
    b = host_rows(rng, "node-b", states, skip=set(range(20, 22)) | set(range(40, 45)))
    write(os.path.join(out, "late_sample", "node-a.csv"), [HEADER] + a)
    write(os.path.join(out, "late_sample", "node-b.csv"), [HEADER] + b)

    # Clock jumps: node-b steps +1 h at t=30 (VM resume); node-a steps back
    # 10 min at t=45 (NTP step).
    rng = random.Random(13)
    states = timeline([(60, healthy)])
    a = host_rows(rng, "node-a", states)
    b = host_rows(rng, "node-b", states)
    shift = lambda rows, first, by: rows[:first * GPUS] + [
        row_shift(r, by) for r in rows[first * GPUS:]]
    write(os.path.join(out, "clock_jump", "node-a.csv"), [HEADER] + shift(a, 45, -600))
    write(os.path.join(out, "clock_jump", "node-b.csv"), [HEADER] + shift(b, 30, 3600))

    bad_input(out)


def row_shift(r, by):
    f = r.split(", ")
    d = datetime.datetime.strptime(f[0], "%Y/%m/%d %H:%M:%S.%f")
    t = (d - T0).total_seconds() + by
    f[0] = stamp(t)
    return ", ".join(f)


def bad_input(out):
    """Healthy for 25 s, then the report's deadlock (rank 3), with bad input throughout."""
    rng = random.Random(14)
    states = timeline([(25, healthy), (20, deadlock)])
    a = host_rows(rng, "node-a", states)
    b = host_rows(rng, "node-b", states)

    def at(rows, t, g):
        return t * GPUS + g

    def field(rows, t, g, i, value):
        k = at(rows, t, g)
        f = rows[k].split(", ")
        f[i] = value
        rows[k] = ", ".join(f)

    field(a, 5, 4, 3, "-12.00 W")           # negative power
    field(a, 6, 4, 3, "48000.00 W")         # absurd power
    field(a, 7, 1, 2, "250 %")              # absurd utilization
    field(a, 8, 6, 0, stamp(2))             # time goes backwards
    field(a, 10, 2, 0, "2026/13/45 99:99:99")  # bad timestamp
    field(a, 11, 7, 1, "x")                 # bad index
    for t in range(12, 22):                 # rank 5's power sensor reads negative for 10 s
        field(a, t, 5, 3, "-5.00 W")
    field(a, 30, 3, 2, "[N/A]")             # the stuck rank's utilization drops out...
    field(a, 31, 3, 2, "[N/A]")             # ...for two samples
    field(a, 36, 3, 2, "250 %")
    k = at(a, 3, 2)
    a[k] = ", ".join(a[k].split(", ")[:4])  # missing column
    # Insert garbage after the edits so the row indices above stay right.
    a.insert(at(a, 9, 0), "hello world")
    a.insert(at(a, 33, 0), "\x01\x02\x7f garbage \u00ff")
    a.insert(0, "#### truncated by a full disk ####, , , , , , ,")
    field(b, 17, 0, 0, stamp(14))           # node-b: time goes backwards too
    b[at(b, 20, 3)] += ", 1, 2"             # extra columns
    write(os.path.join(out, "bad_input", "node-a.csv"), [HEADER] + a)
    write(os.path.join(out, "bad_input", "node-b.csv"), [HEADER] + b)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="testdata/triage")
    args = ap.parse_args()
    single_states(args.out)
    transitions(args.out)
    faults(args.out)


if __name__ == "__main__":
    main()
