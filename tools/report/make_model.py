#!/usr/bin/env python3
"""Writes run-report data models (docs/report_format.md, format_version 1) for
developing and testing the report page (src/report/page/).

Two fixtures, one JSON file each under --out (default build/report-fixtures), for what
only a whole run has or a partial one lacks (the triage fixtures and the 1,024-GPU case
are built by `evenkeel report` itself from telemetry, see tests/report/harness.js):

  sft16-3h          16 GPUs x 3 h, everything present: two attempts (a crash, a restart),
                    checkpoints, a starvation episode, series, incidents of every source;
                    three heatmap levels.
  partial           sft16-3h without telemetry, loss and checkpoints: notes say why.

Pages are made from them with `evenkeel report --from-model FILE.json -o PAGE.html`.
Deterministic (fixed seeds). Needs numpy (the project's .venv has it):
    .venv/bin/python tools/report/make_model.py [--out DIR] [NAME ...]
"""

import argparse
import base64
import csv
import datetime
import json
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NAMES = ["HEALTHY", "CHECKPOINT", "DEADLOCK_SUSPECT", "STARVATION", "COMMUNICATION", "IDLE",
         "UNKNOWN"]
COLORS = {"HEALTHY": "#009E73", "CHECKPOINT": "#56B4E9", "DEADLOCK_SUSPECT": "#D55E00",
          "STARVATION": "#E69F00", "COMMUNICATION": "#CC79A7", "IDLE": "#999999",
          "UNKNOWN": "#000000"}
# Most severe first (docs/report_format.md, "Verdicts").
SEVERITY = ["DEADLOCK_SUSPECT", "STARVATION", "COMMUNICATION", "UNKNOWN", "CHECKPOINT", "IDLE",
            "HEALTHY"]
SEV_OF = np.array([SEVERITY.index(n) for n in NAMES] + [255] * 249, dtype=np.uint8)  # name -> sev
NAME_OF_SEV = np.array([NAMES.index(n) for n in SEVERITY] + [255] * 249, dtype=np.uint8)
POWER_MAX_W = 1500.0
MISSING = 255
MAX_COLS0 = 2048
HEATMAP_BUDGET = 16 << 20  # raw bytes of all levels; base64 adds a third
TRIAGE_T0 = datetime.datetime(2026, 11, 29, 10, 0, 0, tzinfo=datetime.timezone.utc).timestamp()
RUN_T0 = 1796000000.0


def b64(a):
    return base64.b64encode(np.ascontiguousarray(a, dtype=np.uint8).tobytes()).decode("ascii")


def power_byte(w):
    return np.clip(np.rint(np.asarray(w, dtype=np.float64) / POWER_MAX_W * 254), 0, 254)


def level_cols(n_slots, world):
    """Columns of each level: <= 2,048 first, 4x each, the samples themselves last."""
    cols = [min(MAX_COLS0, n_slots)]
    while cols[-1] < n_slots:
        nxt = min(cols[-1] * 4, n_slots)
        if (sum(cols) + nxt) * world * 4 > HEATMAP_BUDGET:
            break
        cols.append(nxt)
    return cols


def col_starts(n_slots, cols):
    """First sample slot of each column: slot k is in column floor(k / (n/cols))."""
    c = np.arange(cols, dtype=np.int64)
    return (c * n_slots + cols - 1) // cols


# ---- levels from a per-sample grid (one reading per rank and slot) ------------------

def reduce_cols(grid, starts, how):
    """Min or max over each column's slots, ignoring MISSING; MISSING if none."""
    if how == "min":  # MISSING (255) is above every reading, so plain min ignores it
        return np.minimum.reduceat(grid, starts, axis=1)
    miss = grid == MISSING
    out = np.maximum.reduceat(np.where(miss, 0, grid).astype(np.uint8), starts, axis=1)
    out[np.logical_and.reduceat(miss, starts, axis=1)] = MISSING
    return out


def levels_from_grid(t0, dt_s, util, power, cols_list):
    """util/power: uint8 [world, n_slots] (power as bytes), MISSING where no reading."""
    n = util.shape[1]
    levels = []
    for cols in cols_list:
        s = col_starts(n, cols)
        levels.append({"cols": cols, "t0": t0, "dt": n * dt_s / cols,
                       "util_min": b64(reduce_cols(util, s, "min")),
                       "util_max": b64(reduce_cols(util, s, "max")),
                       "power_min": b64(reduce_cols(power, s, "min")),
                       "power_max": b64(reduce_cols(power, s, "max"))})
    return levels


def bands_from_slots(t0, dt_s, verdict, cols_list):
    """verdict: uint8 [n_slots] index into NAMES or 255; per column the most severe."""
    sev = SEV_OF[verdict]
    out = []
    for cols in cols_list:
        s = col_starts(len(verdict), cols)
        out.append({"cols": cols, "t0": t0, "dt": len(verdict) * dt_s / cols,
                    "values": b64(NAME_OF_SEV[np.minimum.reduceat(sev, s)])})
    return out


def segments_from_slots(t0, dt_s, verdict, about):
    """Runs of one verdict; about(name, first_slot) -> (ranks, reason)."""
    segs = []
    n = len(verdict)
    edges = np.flatnonzero(np.diff(verdict.astype(np.int16))) + 1
    for a, b in zip(np.r_[0, edges], np.r_[edges, n]):
        v = int(verdict[a])
        if v == 255:
            continue
        ranks, reason = about(NAMES[v], int(a))
        segs.append({"t0": t0 + a * dt_s, "t1": t0 + b * dt_s, "verdict": NAMES[v],
                     "ranks": ranks, "reason": reason})
    return segs


# ---- triage fixtures: CSV readings ---------------------------------------------------


def iso(t):
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


# ---- synthetic runs: per-sample grids ----------------------------------------------

class Run:
    """A synthetic run sampled once a second: util/power grids plus a verdict per slot."""

    def __init__(self, world, seconds, seed):
        self.world, self.n = world, seconds
        self.rng = np.random.default_rng(seed)
        self.util = np.full((world, seconds), 100, dtype=np.uint8)
        low = self.rng.random((world, seconds)) < 0.1
        self.util[low] = self.rng.choice(np.array([98, 99], dtype=np.uint8), size=int(low.sum()))
        w = np.clip(self.rng.normal(990, 15, (world, seconds)), 945, 1035)
        self.power = power_byte(w).astype(np.uint8)
        self.verdict = np.full(seconds, NAMES.index("HEALTHY"), dtype=np.uint8)
        self.reasons = {}  # slot -> (ranks, reason) for non-healthy runs

    def state(self, a, b, ranks, util, mean_w, sd_w, verdict=None, why=None):
        """Sets ranks (slice or list) over slots [a, b) to util (int or (lo, hi)) and power."""
        shape = self.util[ranks, a:b].shape
        if isinstance(util, tuple):
            self.util[ranks, a:b] = self.rng.integers(util[0], util[1] + 1, shape)
        else:
            self.util[ranks, a:b] = util
        self.power[ranks, a:b] = power_byte(self.rng.normal(mean_w, sd_w, shape))
        if verdict:
            self.verdict[a:b] = NAMES.index(verdict)
            self.reasons[a] = why

    def missing(self, a, b, ranks):
        self.util[ranks, a:b] = MISSING
        self.power[ranks, a:b] = MISSING

    def checkpoint(self, end, secs=120):
        a = end - secs
        self.state(a, end, slice(1, None), 100, 190, 3)
        self.state(a, end, [0], 0, 196, 4, "CHECKPOINT",
                   ([0], "rank 0 at 0 %% (writing the checkpoint), the other %d at 100 %%, "
                    "~190 W" % (self.world - 1)))

    def deadlock(self, a, b, stuck):
        self.state(a, b, slice(None), 100, 191, 3)
        self.state(a, b, [stuck], 0, 187, 3, "DEADLOCK_SUSPECT",
                   ([stuck], "rank %d at 0 %%, the other %d at 100 %%, mean power 190 W "
                    "(floor)" % (stuck, self.world - 1)))

    def model(self, t0, hosts, gpus_per_node):
        cols_list = level_cols(self.n, self.world)
        about = lambda name, a: self.reasons.get(a, ([], "all ranks busy at ~990 W"))
        return {
            "time": {"start": t0, "end": t0 + self.n},
            "ranks": [{"rank": r, "host": hosts[r // gpus_per_node], "gpu": r % gpus_per_node}
                      for r in range(self.world)],
            "heatmap": {"scale": {"util_max": 100, "power_max_w": POWER_MAX_W},
                        "missing": MISSING,
                        "levels": levels_from_grid(t0, 1.0, self.util, self.power, cols_list)},
            "verdicts": {"names": NAMES, "colors": COLORS,
                         "segments": segments_from_slots(t0, 1.0, self.verdict, about),
                         "band": bands_from_slots(t0, 1.0, self.verdict, cols_list)},
        }


STEP_S = 5.04  # field report: save_every=500 is ~42 min


def series(rng, spans, tokens_per_s, every=5):
    """spans: [(t_start, t_end, first_step)] of training; a point every `every` steps."""
    out = {"tokens_per_s": [], "step": [], "loss": []}
    for a, b, s0 in spans:
        t, step = a, s0
        while t < b:
            out["step"].append([t, step])
            out["tokens_per_s"].append([t, round(float(rng.normal(tokens_per_s,
                                                                  tokens_per_s * 0.01)), 1)])
            loss = 0.68 + 0.92 * np.exp(-step / 900) + rng.normal(0, 0.02)
            out["loss"].append([t, round(float(loss), 4)])
            t += every * STEP_S
            step += every
    return out


def header(name, world, nodes, gpn, notes, live=False):
    return {"format_version": 1, "generated": "2026-11-30T12:00:00Z",
            "evenkeel_version": "0.1.0", "live": live, "poll_s": 1,
            "run": {"name": name, "run_file": "/runs/%s.toml" % name,
                    "xxh3": "0123456789abcdef", "world": world, "nodes": nodes,
                    "gpus_per_node": gpn,
                    "hosts": ["node-%03d" % i for i in range(nodes)]},
            "notes": notes}


def goodput(wall: float) -> dict:
    """summary.json's goodput (docs/launch.md "Goodput"): parts that sum to `wall`."""
    training, redone = round(0.8 * wall), round(0.08 * wall)
    restart = {"detection": 2.0, "stopping": 12.0, "rendezvous": 40.0, "startup": 186.0}
    other = wall - training - redone - sum(restart.values()) - 120.0
    return {"ratio": round(training / wall, 6), "wall_s": wall, "training_s": float(training),
            "redone_s": float(redone), "restart_s": restart, "save_blocked_s": 120.0, "other_s": other}


def build_sft16():
    world, n, t0 = 16, 3 * 3600, RUN_T0
    run = Run(world, n, seed=16)
    hosts = ["node-000", "node-001"]
    ck = lambda step, start, s0: start + (step - s0) * STEP_S
    # attempt 1: steps 0..833, rank 9 killed at 4200 s; checkpoint 500 at 2520 s.
    run.checkpoint(2520)
    run.state(4200, 4380, slice(None), 0, 140, 4, "IDLE", ([], "all ranks at 0 %, ~140 W"))
    run.missing(4200, 4320, slice(8, 16))
    run.state(4380, 4440, slice(None), (0, 40), 350, 30, "UNKNOWN",
              ([], "loading the checkpoint: low, scattered utilization at ~350 W"))
    # attempt 2 from step 500 at 4440 s; checkpoints 1000, 1500 and the final 1700.
    c2 = [(s, int(ck(s, 4440, 500)) + 120) for s in (1000, 1500)]
    for _, t in c2:
        run.checkpoint(t)
    run.state(7800, 8700, slice(None), (20, 100), 575, 15, "STARVATION",
              ([], "utilization scatter at ~575 W: input-starved"))
    end2 = int(ck(1700, 4440, 500)) + 240
    run.checkpoint(end2)
    run.state(end2, n, slice(None), 0, 140, 4, "IDLE", ([], "all ranks at 0 %, ~140 W"))
    m = header("sft16-3h", world, 2, 8, [])
    m["run"]["hosts"] = hosts
    m.update(run.model(t0, hosts, 8))
    rng = np.random.default_rng(17)
    m["series"] = series(rng, [(t0, t0 + 4200, 0), (t0 + 4440, t0 + end2 - 120, 500)], 53000)
    m["checkpoints"] = [
        {"step": 500, "time": t0 + 2520, "path": "/nfs/ckpt/step-00000500", "ok": True,
         "verdict": "ok"}] + [
        {"step": s, "time": t0 + t, "path": "/nfs/ckpt/step-%08d" % s, "ok": True,
         "verdict": "ok"} for s, t in c2] + [
        {"step": 1700, "time": t0 + end2, "path": "/nfs/ckpt/step-00001700", "ok": True,
         "verdict": "ok"}]
    # Attempt 1 as the launcher records it: rank 9 killed (the host's OOM killer), rank 8,
    # its neighbour in the collective, with the error it saw; the page shows both causes.
    causes = [{"rank": 8, "cause": "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] "
                                   "Connection closed by peer [10.0.0.2]:41771 (in forward (step 834))"},
              {"rank": 9, "cause": "killed by SIGKILL"}]
    reason = "; ".join(f"rank {c['rank']}: {c['cause']}" for c in causes)
    m["attempts"] = [
        {"attempt": 1, "start": t0, "end": t0 + 4200, "outcome": "failed", "decision": "restart",
         "exit_code": 0, "reason": f"{reason}; restarting from checkpoint step 500 after 180 s",
         "flight_recorder": "no flight-recorder dumps", "causes": causes},
        {"attempt": 2, "start": t0 + 4380, "end": t0 + end2, "outcome": "completed",
         "decision": "done", "exit_code": 0, "reason": "all 1700 steps; final checkpoint verified",
         "flight_recorder": "", "causes": []}]
    m["incidents"] = [
        {"source": "launcher", "kind": "attempt failed",
         "summary": "attempt 1 failed: restart: " + m["attempts"][0]["reason"],
         "ranks": [8, 9], "hosts": ["node-001"], "since": t0 + 4200, "until": t0 + 4380,
         "evidence": "\n".join([f"rank {c['rank']}: {c['cause']}" for c in causes]
                               + ["flight recorder: no flight-recorder dumps"]),
         "gpu_hours": round(16 * (4200 - 2520 + 240) / 3600, 2)},
        {"source": "triage", "kind": "starvation",
         "summary": "STARVATION: utilization scatter at ~575 W", "ranks": [],
         "hosts": hosts, "since": t0 + 7800, "until": t0 + 8700,
         "evidence": "ranks between 20 and 100 % each second, mean power 575 W",
         "gpu_hours": round(16 * 900 / 3600, 2)},
        {"source": "watcher", "kind": "throughput_floor",
         "summary": "tokens/s 21k below the floor of 40k for 15 min", "ranks": [],
         "hosts": hosts, "since": t0 + 7860, "until": t0 + 8700,
         "evidence": "step time 13.1 s against 5.0 s", "gpu_hours": 3.73}]
    m["summary"] = {"outcome": "completed", "steps": 1700, "planned_steps": 1700,
                    "tokens": 1700 * 267264, "tokens_per_s": 53000, "attempts": 2,
                    "gpu_hours_used": round(16 * n / 3600, 1),
                    "gpu_hours_lost": round(16 * (4200 - 2520 + 240) / 3600, 1),
                    "evenfix_dropped_blocks": 53,
                    "final_checkpoint": "/nfs/ckpt/step-00001700",
                    # summary.json's goodput (docs/launch.md "Goodput"): the parts sum to wall_s.
                    "goodput": goodput(float(n))}
    return m


def build_partial():
    m = build_sft16()
    m["run"]["name"] = "partial"
    for k in ("heatmap", "verdicts", "checkpoints"):
        del m[k]
    del m["series"]["loss"]
    m["ranks"] = []
    m["incidents"] = [i for i in m["incidents"] if i["source"] != "triage"]
    m["notes"] = ["no telemetry given: heatmaps and verdicts left out",
                  "trainer log has no loss field: loss left out",
                  "no checkpoint directory given: checkpoints left out"]
    return m


def all_builders():
    # The triage fixtures and the 1,024-GPU case are built by `evenkeel report` itself
    # from telemetry (tests/report/harness.js); these two exercise what only a whole run
    # has (attempts, series, incidents of every source) and what a partial one lacks.
    return {"sft16-3h": build_sft16, "partial": build_partial}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "report-fixtures"))
    ap.add_argument("names", nargs="*", help="fixtures to write (default: all)")
    args = ap.parse_args()
    builders = all_builders()
    unknown = [n for n in args.names if n not in builders]
    if unknown:
        sys.exit("make_model: error: unknown fixture %s (known: %s)" % (
            ", ".join(unknown), ", ".join(builders)))
    os.makedirs(args.out, exist_ok=True)
    for name in args.names or builders:
        path = os.path.join(args.out, name + ".json")
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            json.dump(builders[name](), f, separators=(",", ":"))
        os.replace(path + ".tmp", path)
        print("%s (%d bytes)" % (path, os.path.getsize(path)))


if __name__ == "__main__":
    main()
