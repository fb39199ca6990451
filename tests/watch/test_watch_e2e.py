"""End to end: evenkeel agents and watcher against Debian's prometheus and
prometheus-alertmanager on loopback, with simulated ranks and GPU telemetry
replayed from the triage fixtures. Each scenario asserts what reached
Alertmanager (its API v2, and the notifications it sent on to its receiver)
and when.

Run: .venv/bin/python -m pytest tests/watch -q   (EVENKEEL_BIN=path/to/evenkeel)
"""

import json
import os
import re
import signal
import subprocess
import time

import pytest

from harness import (HOSTS, ROOT, Alertmanager, Prometheus, Receiver, Run, TOKEN, fake_nvml, free_port,
                     http_json, need, stop, wait_for)

RULES_DOC = os.path.join(ROOT, "docs", "prometheus.md")


def doc_rules() -> str:
    text = open(RULES_DOC).read()
    blocks = re.findall(r"```yaml\n(.*?)```", text, re.S)
    rules = [b for b in blocks if b.startswith("groups:")]
    assert len(rules) == 1, "docs/prometheus.md must hold exactly one rules block"
    return rules[0]


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    work = str(tmp_path_factory.mktemp("watch"))
    rec = Receiver()
    am = Alertmanager(os.path.join(work, "am"), rec)
    prom = Prometheus(os.path.join(work, "prom"), doc_rules())
    yield work, rec, am, prom
    prom.close()
    am.stop()
    rec.close()


@pytest.fixture
def run_factory(stack):
    work, rec, am, prom = stack
    runs = []

    def make(name, **kw):
        r = Run(work, f"{name}-{int(time.time() * 1000) % 100000}", am, **kw)
        runs.append(r)
        return r

    yield make
    for r in runs:
        r.close()


def firing(rec, run, name):
    return [a for t, s, a in rec.for_run(run) if s == "firing" and a["labels"]["alertname"] == name]


def resolved(rec, run, name):
    return [a for t, s, a in rec.for_run(run) if s == "resolved" and a["labels"]["alertname"] == name]


def names(rec, run):
    return sorted({a["labels"]["alertname"] for t, s, a in rec.for_run(run)})


def test_promtool_accepts_the_documented_rules(tmp_path):
    path = tmp_path / "rules.yml"
    path.write_text(doc_rules())
    out = subprocess.run([need("promtool"), "check", "rules", str(path)], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS: 7 rules found" in out.stdout


def test_clean_completion(stack, run_factory):
    work, rec, am, prom = stack
    r = run_factory("complete")
    r.start_agents()
    prom.set_targets([f"127.0.0.1:{r.ports[h]}" for h in HOSTS])
    r.start_watcher()
    r.start_ranks(steps=20, total_steps=20, step_s=0.2, ckpt_s=0.4, linger_s=0)
    alert = wait_for("completion in alertmanager", lambda: am.alerts(r.name, "EvenkeelCompletion"), 30)
    assert alert[0]["labels"]["severity"] == "info"
    assert "step-00000020" in alert[0]["annotations"]["summary"]
    # Prometheus scraped both agents: every rank's step is there.
    steps = wait_for("prometheus scrape", lambda: (lambda v: v if len(v) == 16 else None)(
        prom.query(f'evenkeel_rank_step{{run="{r.name}"}}')), 15)
    assert {s["metric"]["rank"] for s in steps} == {str(i) for i in range(16)}
    wait_for("prometheus rule EvenkeelCompletion", lambda: [
        a for a in prom.firing(r.name) if a["labels"]["alertname"] == "EvenkeelCompletion"], 15)
    time.sleep(3)  # the ranks have exited: nothing else may follow
    assert names(rec, r.name) == ["EvenkeelCompletion"]
    assert len(firing(rec, r.name, "EvenkeelCompletion")) == 1


def test_rank_sigkill_is_a_crash(stack, run_factory):
    work, rec, am, prom = stack
    r = run_factory("crash")
    r.start_agents()
    prom.set_targets([f"127.0.0.1:{r.ports[h]}" for h in HOSTS])
    r.start_watcher()
    r.start_ranks(step_s=0.2, total_steps=100000)
    r.wait_beating(3)
    killed_at = time.time()
    r.ranks[11].send_signal(signal.SIGKILL)
    alert = wait_for("crash in alertmanager", lambda: am.alerts(r.name, "EvenkeelCrash"), 15)
    latency = time.time() - killed_at
    ann = alert[0]["annotations"]
    assert ann["ranks"] == "11" and ann["hosts"] == "node-b", ann
    assert "pid" in ann["evidence"]
    assert float(ann["gpu_hours"]) >= 0
    assert latency < 0.5 + 2 + 2, f"crash took {latency:.1f} s to reach alertmanager"
    wait_for("prometheus rule EvenkeelCrash", lambda: [
        a for a in prom.firing(r.name) if a["labels"]["alertname"] == "EvenkeelCrash"], 15)
    wait_for("receiver notified", lambda: firing(rec, r.name, "EvenkeelCrash"), 10)
    assert len(firing(rec, r.name, "EvenkeelCrash")) == 1


def test_heartbeats_stopping_is_a_hang(stack, run_factory):
    work, rec, am, prom = stack
    r = run_factory("hang")
    r.start_agents()
    r.start_watcher()
    r.start_ranks(step_s=0.2, stop_at=10)
    alert = wait_for("hang in alertmanager", lambda: am.alerts(r.name, "EvenkeelHang"), 30, every=0.05)
    took = time.time() - r.last_progress()
    # limit = max(floor 4 s, 5 x 0.2 s) = 4 s; then at most one 0.5 s poll, the
    # agent's answer and the POST to Alertmanager.
    assert 4 <= took < 4 + 0.5 + 1.5, f"hang reached alertmanager {took:.2f} s after the last step"
    assert alert[0]["annotations"]["ranks"] == "0-15"
    assert "limit max(floor 4 s, 5 x step 0.2" in alert[0]["annotations"]["evidence"]
    assert names(rec, r.name) in ([], ["EvenkeelHang"])


def test_deadlock_signature(stack, run_factory):
    work, rec, am, prom = stack
    # healthy_deadlock: healthy until 30 s, ramp at 30 s, deadlock from 31 s.
    r = run_factory("deadlock", telemetry="healthy_deadlock", replay_from=26,
                    watch={"hang_floor_s": 60})
    r.start_ranks(step_s=0.2)
    r.start_agents()
    prom.set_targets([f"127.0.0.1:{r.ports[h]}" for h in HOSTS])
    # The signature's first sample is the ramp at 30 s (rank 3 already at 0%,
    # power falling), floor power from 31 s. Measured from 30 s, and the replay
    # clock starts after Popen: this onset is early, the latency conservative.
    onset = r.agent_start_times["node-a"] + (30 - 26)
    r.start_watcher()
    alert = wait_for("deadlock in alertmanager", lambda: am.alerts(r.name, "EvenkeelDeadlock"), 25)
    latency = time.time() - onset
    ann = alert[0]["annotations"]
    assert ann["ranks"] == "3", ann
    assert ann["hosts"] == "node-a"
    # The alert budget (docs/watch.md) is 2 samples + 2 s at 1 sample/s (4 s); this run samples at 0.5 s.
    assert latency < 2 * 1 + 2, f"deadlock took {latency:.1f} s from onset"
    wait_for("receiver notified", lambda: firing(rec, r.name, "EvenkeelDeadlock"), 10)
    # The documented PromQL rule sees the same signature in the scraped metrics.
    wait_for("prometheus rule EvenkeelDeadlock", lambda: [
        a for a in prom.firing(r.name) if a["labels"]["alertname"] == "EvenkeelDeadlock"], 20)
    assert not [a for a in prom.firing(r.name) if a["labels"]["alertname"] == "EvenkeelStarvation"]


def test_throughput_floor(stack, run_factory):
    work, rec, am, prom = stack
    r = run_factory("slow", watch={"throughput_floor_tok_s": 1000000})
    r.start_agents()
    r.start_watcher()
    r.start_ranks(step_s=0.2, tokens_per_step=1000)  # 16 x 5 x 1000 = 80k tok/s
    alert = wait_for("throughput in alertmanager", lambda: am.alerts(r.name, "EvenkeelThroughput"), 20)
    assert "below the floor 1000000 tok/s" in alert[0]["annotations"]["evidence"]
    assert names(rec, r.name) in ([], ["EvenkeelThroughput"])


def test_checkpoint_pause_raises_nothing(stack, run_factory):
    work, rec, am, prom = stack
    r = run_factory("ckpt")
    r.start_agents()
    r.start_watcher()
    # A 7 s save at step 10 (every rank waits in it), well past the 4 s hang
    # limit but inside the 10 s allowance; then the run completes.
    r.start_ranks(steps=30, total_steps=30, step_s=0.2, ckpt_at=10, ckpt_s=7)
    wait_for("completion", lambda: am.alerts(r.name, "EvenkeelCompletion"), 40)
    time.sleep(1.5)
    assert names(rec, r.name) in ([], ["EvenkeelCompletion"]), rec.for_run(r.name)
    assert [a["labels"]["alertname"] for a in am.alerts(r.name)] == ["EvenkeelCompletion"]


def test_agent_killed_is_blind(stack, run_factory):
    work, rec, am, prom = stack
    r = run_factory("blind")
    r.start_agents()
    r.start_watcher()
    r.start_ranks(step_s=0.2)
    r.wait_beating(2)
    killed = time.time()
    stop(r.agents["node-b"], signal.SIGKILL)
    alert = wait_for("blind in alertmanager", lambda: am.alerts(r.name, "EvenkeelBlind"), 15)
    took = time.time() - killed
    assert alert[0]["annotations"]["hosts"] == "node-b"
    assert alert[0]["annotations"]["ranks"] == "8-15"
    assert took < 3 + 0.5 + 2.5, f"blind took {took:.1f} s"
    # The rest of the run is still watched: node-a's ranks keep advancing, no hang.
    assert not am.alerts(r.name, "EvenkeelHang")
    # Back: the incident resolves with an endsAt.
    r.start_agent("node-b")
    wait_for("blind resolved", lambda: resolved(rec, r.name, "EvenkeelBlind"), 20)
    assert len(firing(rec, r.name, "EvenkeelBlind")) == 1


def test_sink_down_and_back(stack, run_factory, tmp_path):
    work, rec, am, prom = stack
    # A second alertmanager that is down when the incident opens.
    rec2 = Receiver()
    port = free_port()
    r = run_factory("sinkdown", alert_url=f"http://127.0.0.1:{port}")
    r.start_agents()
    r.start_watcher()
    r.start_ranks(step_s=0.2)
    r.wait_beating(2)
    r.ranks[2].send_signal(signal.SIGKILL)
    wait_for("delivery failing", lambda: any(e["event"] == "delivery_failed" for e in r.log_events()), 15)
    time.sleep(2)
    am2 = Alertmanager(str(tmp_path / "am2"), rec2, port=port)
    try:
        alert = wait_for("crash delivered after the sink came back", lambda: am2.alerts(r.name, "EvenkeelCrash"), 15)
        assert alert[0]["annotations"]["ranks"] == "2"
        wait_for("receiver notified", lambda: firing(rec2, r.name, "EvenkeelCrash"), 10)
        time.sleep(2)
        assert len(firing(rec2, r.name, "EvenkeelCrash")) == 1
        delivered = [e for e in r.log_events() if e["event"] == "delivered"]
        assert len(delivered) == 1 and delivered[0]["attempts"] >= 2
    finally:
        am2.stop()
        rec2.close()


def test_watcher_restarted_mid_incident(stack, run_factory):
    work, rec, am, prom = stack
    r = run_factory("restart")
    control = os.path.join(r.dir, "control")
    r.start_agents()
    r.start_watcher()
    r.start_ranks(step_s=0.2, stop_at=8, control=control)
    wait_for("hang in alertmanager", lambda: am.alerts(r.name, "EvenkeelHang"), 20)
    wait_for("receiver notified", lambda: firing(rec, r.name, "EvenkeelHang"), 10)
    stop(r.watcher, signal.SIGKILL)
    r.start_watcher()  # same state dir
    time.sleep(3)
    assert len(firing(rec, r.name, "EvenkeelHang")) == 1
    opened = [e for e in r.log_events() if e["event"] == "incident_opened"]
    assert len(opened) == 1, opened
    # The ranks resume while the new watcher runs: resolved once, with endsAt.
    with open(control, "w") as f:
        f.write("resume")
    wait_for("hang resolved", lambda: resolved(rec, r.name, "EvenkeelHang"), 15)
    res = resolved(rec, r.name, "EvenkeelHang")
    assert len(res) == 1 and res[0]["endsAt"] > res[0]["startsAt"]
    assert not am.alerts(r.name, "EvenkeelHang")


def test_agent_requires_its_token(stack, run_factory):
    work, rec, am, prom = stack
    r = run_factory("token")
    r.start_agent("node-a")
    url = f"http://127.0.0.1:{r.ports['node-a']}"
    import urllib.error
    import urllib.request
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(f"{url}/metrics", timeout=2)
    assert e.value.code == 401
    body = http_json(f"{url}/status", 2, {"Authorization": f"Bearer {TOKEN}"})
    assert body["host"] == "node-a" and body["telemetry"] == "ok"


def test_agent_reads_nvml_through_dlopen(stack, run_factory):
    work, rec, am, prom = stack
    r = run_factory("nvml", telemetry_args=["--telemetry", "nvml", "--nvml-library", fake_nvml()])
    r.start_agent("node-a")
    url = f"http://127.0.0.1:{r.ports['node-a']}/status"
    s = wait_for("NVML readings", lambda: (lambda b: b if len(b["gpus"]) == 2 else None)(
        http_json(url, 2, {"Authorization": f"Bearer {TOKEN}"})), 10)
    g = {x["gpu"]: x for x in s["gpus"]}
    assert g[0]["power_w"] > 600 and "power_w" not in g[1]  # device 1 has no power sensor: absent, not 0
    assert s["telemetry"] == "ok"


def test_agent_without_gpu_telemetry_is_blind_not_healthy(stack, run_factory):
    work, rec, am, prom = stack
    r = run_factory("nonvml", telemetry_args=["--telemetry", "nvml", "--nvml-library", "/nonexistent/libnvidia-ml.so.1"])
    r.start_agents()
    r.start_watcher()
    r.start_ranks(step_s=0.2)
    alerts = wait_for("blind for both nodes", lambda: (lambda a: a if len(a) == 2 else None)(
        am.alerts(r.name, "EvenkeelBlind")), 20)
    assert sorted(a["annotations"]["hosts"] for a in alerts) == ["node-a", "node-b"]
    assert all("no GPU telemetry" in a["annotations"]["evidence"] for a in alerts)
    assert "nonexistent" in alerts[0]["annotations"]["evidence"]


def test_a_frozen_agent_never_stalls_the_others(stack, run_factory):
    work, rec, am, prom = stack
    r = run_factory("frozen")
    r.start_agents()
    r.start_watcher()
    r.start_ranks(step_s=0.2)
    r.wait_beating(2)
    # node-b's agent stops answering but keeps its socket (connects hang, reads time out).
    r.agents["node-b"].send_signal(signal.SIGSTOP)
    try:
        killed = time.time()
        r.ranks[4].send_signal(signal.SIGKILL)  # on node-a
        alert = wait_for("crash on node-a", lambda: am.alerts(r.name, "EvenkeelCrash"), 15)
        took = time.time() - killed
        assert alert[0]["annotations"]["ranks"] == "4"
        # one 0.5 s poll, bounded by the 1 s agent timeout, plus delivery
        assert took < 0.5 + 1 + 1.5, f"crash took {took:.2f} s with a frozen agent"
        blind = wait_for("node-b blind", lambda: am.alerts(r.name, "EvenkeelBlind"), 15)
        assert blind[0]["annotations"]["hosts"] == "node-b"
        assert "unreachable" in blind[0]["annotations"]["evidence"]
    finally:
        r.agents["node-b"].send_signal(signal.SIGCONT)


def test_a_rank_that_never_beats_is_blind(stack, run_factory):
    work, rec, am, prom = stack
    r = run_factory("missing")
    r.start_agents()
    r.start_watcher()
    r.start_ranks(step_s=0.2, skip=[13])  # died before its first heartbeat
    alert = wait_for("missing rank in alertmanager", lambda: am.alerts(r.name, "EvenkeelBlind"), 20)
    ann = alert[0]["annotations"]
    assert ann["ranks"] == "13" and ann["hosts"] == "node-b", ann
    assert "15 of 16 ranks reporting" in ann["evidence"]
    assert not am.alerts(r.name, "EvenkeelHang") and not am.alerts(r.name, "EvenkeelCrash")
