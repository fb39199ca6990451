#!/usr/bin/env python3
"""Time to alert, measured end to end with the real binaries: evenkeel agents
replaying the triage fixtures, simulated ranks beating through
evenkeel.heartbeat, evenkeel watch at one sample per second, and Debian's
prometheus-alertmanager on loopback.

  deadlock: from the moment an agent first serves the deadlock shape (rank 3
            at 0% with the rest busy; in the fixture one sample before power
            reaches the floor; read from its /status at 20 Hz) to the alert in
            Alertmanager's API v2.
            Budget (docs/watch.md): 2 samples + 2 s = 4 s at 1 sample/s.
  hang:     from the last step any rank finished (its heartbeat's step_time)
            to the alert in Alertmanager. Budget: the hang limit + one poll.

Prints each trial and the worst, against the field report's three hours of
silence and the NCCL watchdog's 10-30 minutes.

  python3 bench/watch/latency.py [--trials 3] [--evenkeel build-watch/src/cli/evenkeel]
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "watch"))

import harness  # noqa: E402
from harness import HOSTS, TOKEN, Alertmanager, Receiver, Run, http_json, wait_for  # noqa: E402

POLL_S = 1.0
HANG_FLOOR_S = 10.0
REPORT_SILENCE_S = 3 * 3600
NCCL_WATCHDOG_S = (10 * 60, 30 * 60)


def signature_served(run: Run) -> bool:
    """The signature's first sample: rank 3 at 0% while the rest are busy. In the
    fixture that is the ramp sample (power still falling, mid band), one sample
    before floor power; timing from it is the conservative choice."""
    url = f"http://127.0.0.1:{run.ports['node-a']}/status"
    s = http_json(url, 1, {"Authorization": f"Bearer {TOKEN}"})
    g = {x["gpu"]: x for x in s["gpus"]}
    return 3 in g and g[3].get("util_pct", 100) < 5 and all(
        x.get("util_pct", 0) > 80 for i, x in g.items() if i != 3)


def deadlock_trial(work: str, am: Alertmanager) -> float:
    run = Run(work, f"bench-deadlock-{int(time.time() * 1000) % 100000}", am, telemetry="healthy_deadlock",
              replay_from=24, watch={"poll_s": POLL_S, "hang_floor_s": 600, "stale_after_s": 5,
                                     "agent_timeout_s": 0.8})
    try:
        run.start_ranks(step_s=0.5)
        run.start_agents()
        run.start_watcher()
        wait_for("signature served", lambda: signature_served(run), 30, every=0.05)
        t0 = time.time()
        wait_for("deadlock alert", lambda: am.alerts(run.name, "EvenkeelDeadlock"), 30, every=0.05)
        return time.time() - t0
    finally:
        run.close()


def last_progress(run: Run) -> float:
    t = 0.0
    for h in HOSTS:
        d = run.hb_dir(h)
        for n in os.listdir(d):
            if n.startswith("rank-") and n.endswith(".json"):
                with open(os.path.join(d, n)) as f:
                    t = max(t, json.load(f)["step_time"])
    return t


def hang_trial(work: str, am: Alertmanager) -> tuple[float, float]:
    run = Run(work, f"bench-hang-{int(time.time() * 1000) % 100000}", am,
              watch={"poll_s": POLL_S, "hang_floor_s": HANG_FLOOR_S, "hang_factor": 5, "stale_after_s": 5,
                     "agent_timeout_s": 0.8})
    try:
        run.start_agents()
        run.start_watcher()
        run.start_ranks(step_s=0.5, stop_at=6)
        wait_for("hang alert", lambda: am.alerts(run.name, "EvenkeelHang"), 60, every=0.05)
        t1 = time.time()
        return t1 - last_progress(run), HANG_FLOOR_S
    finally:
        run.close()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trials", type=int, default=3)
    p.add_argument("--evenkeel", default="")
    a = p.parse_args()
    if a.evenkeel:
        os.environ["EVENKEEL_BIN"] = os.path.abspath(a.evenkeel)
    work = tempfile.mkdtemp(prefix="ek-watch-bench-")
    rec = Receiver()
    am = Alertmanager(os.path.join(work, "am"), rec)
    ok = True
    try:
        dl = [deadlock_trial(work, am) for _ in range(a.trials)]
        hg = [hang_trial(work, am) for _ in range(a.trials)]
    finally:
        am.stop()
        rec.close()
    dl_budget = 2 * POLL_S + 2
    hang_limit = hg[0][1]
    hang_budget = hang_limit + POLL_S
    print(f"sample interval {POLL_S:.0f} s, {a.trials} trials each, Alertmanager API v2 on loopback\n")
    print(f"{'event':<34}{'trials (s)':<26}{'worst':>8}{'budget':>9}  verdict")
    for name, vals, budget in [("deadlock signature -> alert", dl, dl_budget),
                               (f"hang (limit {hang_limit:.0f} s) -> alert", [v for v, _ in hg], hang_budget)]:
        worst = max(vals)
        good = worst <= budget
        ok = ok and good
        print(f"{name:<34}{', '.join(f'{v:.2f}' for v in vals):<26}{worst:>8.2f}{budget:>9.2f}  "
              f"{'within budget' if good else 'OVER BUDGET'}")
    worst_dl = max(dl)
    worst_hang = max(v for v, _ in hg)
    print()
    print(f"field report, deadlock silent until the watchdog: {REPORT_SILENCE_S:>6} s "
          f"= {REPORT_SILENCE_S / worst_dl:,.0f}x the deadlock alert, "
          f"{REPORT_SILENCE_S / worst_hang:,.0f}x the hang alert")
    print(f"NCCL watchdog timeout: {NCCL_WATCHDOG_S[0]}-{NCCL_WATCHDOG_S[1]} s "
          f"= {NCCL_WATCHDOG_S[0] / worst_dl:,.0f}-{NCCL_WATCHDOG_S[1] / worst_dl:,.0f}x the deadlock alert")
    print(f"median deadlock {statistics.median(dl):.2f} s, median hang {statistics.median(v for v, _ in hg):.2f} s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
