"""Real components on loopback for the watch tests: Debian's prometheus and
prometheus-alertmanager, the evenkeel agent and watcher, simulated ranks.

Every wait is bounded in time and polls at most a few times a second. A missing
binary fails the test (never skips)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from ports import free_port

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FIXTURES = os.path.join(ROOT, "testdata", "triage")
SIM_RANK = os.path.join(ROOT, "tests", "watch", "sim_rank.py")
# The simulated ranks' python: this one (the project's venv), whose evenkeel
# extension writes their checkpoints.
PYTHON = os.environ.get("EK_PYTHON") or sys.executable


def evenkeel_bin() -> str:
    path = os.environ.get("EVENKEEL_BIN") or os.path.join(ROOT, "build-watch", "src", "cli", "evenkeel")
    if not os.access(path, os.X_OK):
        raise RuntimeError(f"evenkeel binary not found at {path} (set EVENKEEL_BIN)")
    return path


def fake_nvml() -> str:
    """The stand-in libnvidia-ml.so built beside the binary (src/telemetry/fake_nvml.cc)."""
    path = os.environ.get("EK_FAKE_NVML") or os.path.join(os.path.dirname(evenkeel_bin()), "..", "telemetry",
                                                          "libek_fake_nvml.so")
    if not os.path.exists(path):
        raise RuntimeError(f"fake NVML library not found at {path} (build ek_fake_nvml or set EK_FAKE_NVML)")
    return os.path.abspath(path)


def need(program: str) -> str:
    path = shutil.which(program)
    if not path:
        raise RuntimeError(f"{program} is not installed (apt install prometheus prometheus-alertmanager)")
    return path


def http_json(url: str, timeout: float = 2.0, headers: dict | None = None):
    req = urllib.request.Request(url, headers=headers or {})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read().decode())


def wait_for(what: str, fn, timeout: float, every: float = 0.1):
    """Calls fn() until it returns something truthy; raises after `timeout` s."""
    deadline = time.monotonic() + timeout
    last_err = None
    while time.monotonic() < deadline:
        try:
            v = fn()
            if v:
                return v
        except (OSError, urllib.error.URLError, ValueError) as e:
            last_err = e
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:.1f} s waiting for {what} (last error: {last_err})")


def stop(proc: subprocess.Popen | None, sig=signal.SIGTERM, timeout: float = 5):
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(sig)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=timeout)


class Receiver:
    """Alertmanager's webhook receiver: records every notification it sends."""

    def __init__(self):
        self.notes: list[tuple[float, dict]] = []
        self.lock = threading.Lock()
        outer = self

        class H(BaseHTTPRequestHandler):
            def do_POST(self):
                n = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(min(n, 1 << 20)) or b"{}")
                with outer.lock:
                    outer.notes.append((time.time(), body))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *a):
                pass

        self.port = free_port()
        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), H)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def for_run(self, run: str) -> list[tuple[float, str, dict]]:
        """(time, status, alert) for every alert of `run` in every notification."""
        out = []
        with self.lock:
            for t, body in self.notes:
                for a in body.get("alerts", []):
                    if a["labels"].get("run") == run:
                        out.append((t, a["status"], a))
        return out

    def close(self):
        self.server.shutdown()


class Alertmanager:
    def __init__(self, workdir: str, receiver: Receiver, port: int | None = None):
        self.bin = need("prometheus-alertmanager")
        self.workdir = workdir
        self.port = port or free_port()
        self.receiver = receiver
        os.makedirs(workdir, exist_ok=True)
        self.config = os.path.join(workdir, "alertmanager.yml")
        with open(self.config, "w") as f:
            f.write(f"""route:
  receiver: rec
  group_by: ['run', 'incident']
  group_wait: 0s
  group_interval: 1s
  repeat_interval: 24h
receivers:
- name: rec
  webhook_configs:
  - url: http://127.0.0.1:{receiver.port}/am
    send_resolved: true
""")
        self.proc = None
        self.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self):
        self.log = open(os.path.join(self.workdir, "alertmanager.log"), "ab")
        self.proc = subprocess.Popen(
            [self.bin, f"--config.file={self.config}", f"--storage.path={self.workdir}/data",
             f"--web.listen-address=127.0.0.1:{self.port}", "--cluster.listen-address="],
            stdout=self.log, stderr=subprocess.STDOUT)
        wait_for("alertmanager ready", lambda: urllib.request.urlopen(f"{self.url}/-/ready", timeout=1).status == 200,
                 20)

    def stop(self):
        stop(self.proc)

    def alerts(self, run: str, name: str | None = None) -> list[dict]:
        """Active alerts of `run` as Alertmanager's API v2 has them."""
        q = urllib.parse.quote(f'run="{run}"')
        out = http_json(f"{self.url}/api/v2/alerts?filter={q}")
        return [a for a in out if name is None or a["labels"]["alertname"] == name]


class Prometheus:
    def __init__(self, workdir: str, rules: str):
        self.bin = need("prometheus")
        self.workdir = workdir
        os.makedirs(workdir, exist_ok=True)
        self.port = free_port()
        self.targets = os.path.join(workdir, "targets.json")
        self.set_targets([])
        rules_path = os.path.join(workdir, "evenkeel-rules.yml")
        with open(rules_path, "w") as f:
            f.write(rules)
        cfg = os.path.join(workdir, "prometheus.yml")
        with open(cfg, "w") as f:
            f.write(f"""global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [{rules_path}]
scrape_configs:
- job_name: evenkeel
  authorization:
    credentials: {TOKEN}
  file_sd_configs:
  - files: [{self.targets}]
    refresh_interval: 1s
""")
        self.log = open(os.path.join(workdir, "prometheus.log"), "ab")
        self.proc = subprocess.Popen(
            [self.bin, f"--config.file={cfg}", f"--storage.tsdb.path={workdir}/data",
             f"--web.listen-address=127.0.0.1:{self.port}"], stdout=self.log, stderr=subprocess.STDOUT)
        wait_for("prometheus ready", lambda: urllib.request.urlopen(f"{self.url}/-/ready", timeout=1).status == 200,
                 30)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def set_targets(self, targets: list[str]):
        tmp = self.targets + ".tmp"
        with open(tmp, "w") as f:
            json.dump([{"targets": targets}], f)
        os.replace(tmp, self.targets)

    def query(self, expr: str) -> list[dict]:
        q = urllib.parse.quote(expr)
        return http_json(f"{self.url}/api/v1/query?query={q}")["data"]["result"]

    def firing(self, run: str) -> list[dict]:
        out = http_json(f"{self.url}/api/v1/alerts")["data"]["alerts"]
        return [a for a in out if a["labels"].get("run") == run and a["state"] == "firing"]

    def close(self):
        stop(self.proc)


TOKEN = "test-token-0123456789"
HOSTS = ["node-a", "node-b"]
GPUS = 8  # the triage fixtures: two hosts of eight GPUs


class Run:
    """One simulated run: a run file, two agents, sixteen ranks, a watcher."""

    def __init__(self, workdir: str, name: str, am: Alertmanager | None, *, watch: dict | None = None,
                 alert_url: str | None = None, telemetry: str = "healthy", replay_from: float = 0,
                 telemetry_args: list[str] | None = None):
        self.dir = os.path.join(workdir, name)
        os.makedirs(self.dir, exist_ok=True)
        self.name = name
        self.ckpt = os.path.join(self.dir, "ckpt")
        self.ranks: dict[int, subprocess.Popen] = {}
        self.agents: dict[str, subprocess.Popen] = {}
        self.agent_start_times: dict[str, float] = {}
        self.ports = {h: free_port() for h in HOSTS}
        self.watcher = None
        self.telemetry, self.replay_from = telemetry, replay_from
        self.telemetry_args = telemetry_args
        w = {"poll_s": 0.5, "hang_floor_s": 4, "hang_factor": 5, "checkpoint_allowance_s": 10,
             "throughput_samples": 3, "stale_after_s": 3, "agent_timeout_s": 1}
        w.update(watch or {})
        lines = [f'[run]\nname = "{name}"', f"[cluster]\nnodes = 2\ngpus_per_node = {GPUS}",
                 'hosts = ["node-a", "node-b"]', f'[checkpoint]\ndir = "{self.ckpt}"', "[watch]"]
        lines += [f"{k} = {v}" for k, v in w.items()]
        lines += ["[alert]", f'alertmanager_url = "{alert_url or am.url}"', "backoff_s = 0.5",
                  "backoff_max_s = 2", "resend_s = 60"]
        self.run_file = os.path.join(self.dir, "run.toml")
        with open(self.run_file, "w") as f:
            f.write("\n".join(lines) + "\n")

    def hb_dir(self, host: str) -> str:
        return os.path.join(self.dir, "hb-" + host)

    def start_agent(self, host: str):
        csv = os.path.join(FIXTURES, self.telemetry, f"{host}.csv")
        cmd = [evenkeel_bin(), "agent", self.run_file, "--listen", f"127.0.0.1:{self.ports[host]}",
               "--host", host, "--heartbeat-dir", self.hb_dir(host), "--token", TOKEN]
        if self.telemetry_args is not None:
            cmd += self.telemetry_args
        else:
            cmd += ["--telemetry", "replay", csv, "--replay-hold", "--replay-from", str(self.replay_from)]
        log = open(os.path.join(self.dir, f"agent-{host}.log"), "ab")
        self.agent_start_times[host] = time.time()
        self.agents[host] = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{self.ports[host]}/status"
        wait_for(f"agent {host}", lambda: http_json(url, 1, {"Authorization": f"Bearer {TOKEN}"}), 10)

    def start_agents(self):
        for h in HOSTS:
            self.start_agent(h)
        self.agents_started = time.time()

    def start_ranks(self, **kw):
        """kw: sim_rank.py options for every rank; per-rank overrides via rank_opts={rank: {...}}."""
        per = kw.pop("rank_opts", {})
        skip = set(kw.pop("skip", ()))
        for node, host in enumerate(HOSTS):
            for local in range(GPUS):
                rank = node * GPUS + local
                if rank in skip:
                    continue
                opts = dict(kw, **per.get(rank, {}))
                cmd = [PYTHON, SIM_RANK, "--dir", self.hb_dir(host), "--rank", str(rank),
                       "--local-rank", str(local), "--ckpt-dir", self.ckpt]
                for k, v in opts.items():
                    cmd += [f"--{k.replace('_', '-')}", str(v)]
                self.ranks[rank] = subprocess.Popen(cmd)

    def steps(self) -> dict[int, int]:
        """Every rank's step as its heartbeat file says now."""
        out = {}
        for h in HOSTS:
            d = self.hb_dir(h)
            for n in os.listdir(d) if os.path.isdir(d) else []:
                if n.startswith("rank-") and n.endswith(".json"):
                    try:
                        with open(os.path.join(d, n)) as f:
                            rec = json.load(f)
                    except (OSError, ValueError):
                        continue
                    out[rec["rank"]] = rec["step"]
        return out

    def last_progress(self) -> float:
        """The newest step_time over all ranks: when the run last advanced."""
        t = 0.0
        for h in HOSTS:
            d = self.hb_dir(h)
            for n in os.listdir(d) if os.path.isdir(d) else []:
                if n.startswith("rank-") and n.endswith(".json"):
                    with open(os.path.join(d, n)) as f:
                        t = max(t, json.load(f)["step_time"])
        return t

    def wait_beating(self, min_step: int = 1, timeout: float = 20):
        """Until every rank has finished `min_step` steps (python start-up is slow on a busy box)."""
        n = len(HOSTS) * GPUS
        wait_for(f"all {n} ranks at step {min_step}",
                 lambda: (lambda s: len(s) == n and min(s.values()) >= min_step)(self.steps()), timeout)

    def start_watcher(self):
        agents = ",".join(f"127.0.0.1:{self.ports[h]}" for h in HOSTS)
        self.watch_log = os.path.join(self.dir, "watch.log")
        self.watcher = subprocess.Popen(
            [evenkeel_bin(), "watch", self.run_file, "--agents", agents, "--token", TOKEN,
             "--state-dir", os.path.join(self.dir, "state"), "--log", self.watch_log],
            stdout=subprocess.DEVNULL, stderr=open(os.path.join(self.dir, "watch.err"), "ab"))

    def log_events(self) -> list[dict]:
        if not os.path.exists(self.watch_log):
            return []
        with open(self.watch_log) as f:
            return [json.loads(line) for line in f if line.strip()]

    def close(self):
        stop(self.watcher)
        for p in self.agents.values():
            stop(p)
        for p in self.ranks.values():
            stop(p, timeout=2)
