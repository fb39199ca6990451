"""evenkeel report's rows are the run's ranks: telemetry assigned to the run's hosts by a host
column, by --telemetry HOST=FILE or by file names, through the real binary. The scenario is
the field report's deadlock (2 nodes x 8 GPUs, rank 3 in the save barrier) recorded into
files that are not named after the run's hosts."""
import json
import os
import shutil
import subprocess

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
EVENKEEL = os.environ.get("EVENKEEL", os.path.join(ROOT, "build", "src", "cli", "evenkeel"))
FIXTURE = os.path.join(ROOT, "testdata", "triage", "healthy_deadlock")
EXIT_BAD_INPUT = 65


def report(*args, cwd):
    assert os.path.exists(EVENKEEL), f"missing {EVENKEEL}: build first"
    return subprocess.run([EVENKEEL, "report", *args], capture_output=True, text=True, cwd=cwd)


def scenario(tmp_path, hosts='"n1", "n2"'):
    (tmp_path / "run.toml").write_text(
        f'[run]\nname = "field"\n[cluster]\nnodes = 2\ngpus_per_node = 8\nhosts = [{hosts}]\n')
    shutil.copy(os.path.join(FIXTURE, "node-a.csv"), tmp_path / "a.csv")
    shutil.copy(os.path.join(FIXTURE, "node-b.csv"), tmp_path / "b.csv")


def test_files_not_named_after_the_hosts_are_bad_input_naming_them_and_the_hosts(tmp_path):
    scenario(tmp_path)
    p = report("run.toml", "--telemetry", "a.csv", "b.csv", "--json", "-o", "model.json", cwd=tmp_path)
    assert p.returncode == EXIT_BAD_INPUT, (p.stdout, p.stderr)
    assert p.stderr.startswith("evenkeel: error: report: telemetry a.csv, b.csv match no host of run.toml "
                               "(hosts: n1, n2)"), p.stderr
    assert "--telemetry n1=a.csv n2=b.csv" in p.stderr, p.stderr
    assert not (tmp_path / "model.json").exists()


def test_host_equals_file_gives_one_row_per_rank_and_the_deadlock_with_evidence(tmp_path):
    scenario(tmp_path)
    p = report("run.toml", "--telemetry", "n1=a.csv", "n2=b.csv", "--json", "-o", "model.json", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    model = json.loads((tmp_path / "model.json").read_text())
    assert model["run"]["world"] == 16 and model["run"]["hosts"] == ["n1", "n2"]
    assert len(model["ranks"]) == 16
    assert [(r["host"], r["gpu"]) for r in model["ranks"]] == [(h, g) for h in ("n1", "n2") for g in range(8)]
    deadlocks = [i for i in model["incidents"] if i["kind"] == "deadlock"]
    assert deadlocks, model["incidents"]
    assert deadlocks[0]["ranks"] == [3] and deadlocks[0]["hosts"] == ["n1"]
    assert all(i["evidence"] for i in model["incidents"]), model["incidents"]
    assert "suspected deadlock" in deadlocks[0]["evidence"], deadlocks[0]
    # Not UNKNOWN for the whole run: the healthy stretch before the deadlock is named.
    verdicts = {s["verdict"] for s in model["verdicts"]["segments"]}
    assert {"HEALTHY", "DEADLOCK_SUSPECT"} <= verdicts, verdicts
    # The page itself builds from the same inputs.
    p = report("run.toml", "--telemetry", "n1=a.csv", "n2=b.csv", "-o", "report.html", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "16 ranks" in p.stdout, p.stdout


def test_a_host_column_and_file_names_match_the_runs_hosts(tmp_path):
    scenario(tmp_path, hosts='"node-b", "node-a"')
    # One file holding both hosts, with a host column; the run lists node-b first.
    rows = ["host, timestamp, index, utilization.gpu [%], power.draw [W], memory.used [MiB]"]
    for name in ("node-a", "node-b"):
        with open(os.path.join(FIXTURE, name + ".csv")) as f:
            rows += [f"{name}, {line.rstrip()}" for line in f.readlines()[1:] if line.strip()]
    (tmp_path / "both.csv").write_text("\n".join(rows) + "\n")
    for telemetry in (["both.csv"], [os.path.join(FIXTURE, "node-a.csv"), os.path.join(FIXTURE, "node-b.csv")]):
        p = report("run.toml", "--telemetry", *telemetry, "--json", "-o", "model.json", cwd=tmp_path)
        assert p.returncode == 0, p.stderr
        model = json.loads((tmp_path / "model.json").read_text())
        assert len(model["ranks"]) == 16
        assert model["ranks"][0]["host"] == "node-b" and model["ranks"][11] == {"rank": 11, "host": "node-a",
                                                                                  "gpu": 3}
        deadlocks = [i for i in model["incidents"] if i["kind"] == "deadlock"]
        assert deadlocks and deadlocks[0]["ranks"] == [11], model["incidents"]


def test_gpus_beyond_the_run_and_bad_host_arguments(tmp_path):
    (tmp_path / "run.toml").write_text('[run]\nname = "small"\n[cluster]\nnodes = 2\ngpus_per_node = 4\n'
                                       'hosts = ["node-a", "node-b"]\n')
    a = os.path.join(FIXTURE, "node-a.csv")
    p = report("run.toml", "--telemetry", a, "--json", "-o", "model.json", cwd=tmp_path)
    assert p.returncode == EXIT_BAD_INPUT, p.stderr
    assert f"telemetry {a}: node-a has GPU index 7, but run.toml has gpus_per_node = 4" in p.stderr, p.stderr
    p = report("run.toml", "--telemetry", "n9=" + a, "--json", "-o", "model.json", cwd=tmp_path)
    assert p.returncode == EXIT_BAD_INPUT, p.stderr
    assert "n9 is not a host of run.toml (hosts: node-a, node-b)" in p.stderr, p.stderr
    # An empty host is a usage error (a bad flag value).
    p = report("run.toml", "--telemetry", "=" + a, "--json", "-o", "model.json", cwd=tmp_path)
    assert p.returncode == 2, p.stderr
    assert "want FILE or HOST=FILE" in p.stderr, p.stderr
