"""The precision table's cases (tests/launch/test_precision.py, docs/launch.md "Precision"):
what each induces through tests/launch/precision_trainer.py and the judgement it must get."""

from __future__ import annotations

from dataclasses import dataclass

DO_NOT_REQUEUE = 93


@dataclass
class Case:
    id: str
    what: str                 # the induced failure, for the table
    spec: dict                # precision_trainer.py's fault for the attempt
    cause_rank: int = -1      # the rank whose named cause is asserted (-1: none)
    cause: str = ""           # what that cause must contain
    action: str = "restart"   # the decision
    exit_code: int | None = None  # the decision's exit code, for a stop or done
    decision: str = "restart"     # the kind of decision, from its reason (decision_kind)
    conclusive: bool = False


def raise_case(id, rank, phase, step, what, cause_phase, **kw) -> Case:
    spec = {"kind": "raise", "rank": rank, "phase": phase, **({"abs_step": step} if kw.pop("absolute", False)
                                                               else {"step": step})}
    return Case(id, what, spec, rank, f"InjectedFault: injected fault on rank {rank} … (in {cause_phase})", **kw)


def background_case(id, rank, step, save_step, what, **kw) -> Case:
    """An exception in the save's background write (the bf16 export's save_file): raised by
    the rank's next step (or, for the last save, at exit) in the phase of that save."""
    spec = {"kind": "raise", "rank": rank, "phase": "save_write",
            **({"abs_step": step} if kw.pop("absolute", False) else {"step": step})}
    return Case(id, what, spec, rank,
                f"SaveFailed: checkpoint step-{save_step:08d}: the background save failed on rank {rank}: InjectedFault: "
                f"injected fault on rank {rank} writing model-… (in save (step {save_step}, written in the background))",
                **kw)


def signal_case(id, rank, sig, point, step, what, cause) -> Case:
    return Case(id, what, {"kind": "signal", "rank": rank, "signal": sig, "point": point, "step": step}, rank, cause)


# 8 steps (16 blocks per rank), a checkpoint every 2. Steps count from the attempt's
# resume point; a fault after a save makes progress, so the chain moves on.
EXCEPTIONS = [
    raise_case("E01", 0, "load", 1, "exception in load, rank 0", "load"),
    raise_case("E02", 1, "load", 1, "exception in load, rank 1", "load"),
    raise_case("E03", 1, "forward", 1, "exception in forward, rank 1, first step", "forward (step 1, micro-batch 0)"),
    raise_case("E04", 0, "forward", 3, "exception in forward, rank 0, after a save", "forward (step 3, micro-batch 0)"),
    raise_case("E05", 0, "backward", 1, "exception in backward, rank 0, first step", "backward (step 3, micro-batch 0)"),
    raise_case("E06", 1, "backward", 3, "exception in backward, rank 1, after a save", "backward (step 5, micro-batch 0)"),
    raise_case("E07", 1, "optimizer", 1, "exception in the optimizer step, rank 1", "optimizer (step 5)"),
    raise_case("E08", 0, "optimizer", 3, "exception in the optimizer step, rank 0, after a save", "optimizer (step 7)"),
    raise_case("E09", 0, "save_stage", 2, "exception staging the save's state, rank 0", "save (step 8)"),
    raise_case("E10", 1, "save_stage", 2, "exception staging the save's state, rank 1", "save (step 8)"),
    background_case("E11", 0, 2, 8, "exception in the save's background write (save_file), rank 0"),
    raise_case("E12", 1, "barrier", 2, "exception entering the save barrier, rank 1", "save_barrier (after step 8)"),
    raise_case("E13", 0, "barrier", 2, "exception entering the save barrier, rank 0", "save_barrier (after step 8)"),
    background_case("E14", 0, 10, 10, "exception in the final save's background write, rank 0", absolute=True),
]
# The chain's last case, with the restart budget spent: stop 75 (an attempt fewer than a run to the end).
EXCEPTIONS_LAST = raise_case("E15", 1, "barrier", 10, "exception entering the final save's barrier, rank 1 "
                             "(the restart budget spent)", "save_barrier (after step 10)", absolute=True,
                             action="stop", exit_code=75, decision="stop: budget spent")
EXCEPTION_BLOCKS = 20  # 10 steps: E04, E06, E08 each move the chain on by one checkpoint (2 steps), E09-E13 run at 8

SIGNALS = [
    signal_case("S01", 1, "SIGKILL", "before_save", 1, "SIGKILL to rank 1 before the attempt's first save", "killed by SIGKILL"),
    signal_case("S02", 0, "SIGKILL", "during_save", 2, "SIGKILL to rank 0 during a save (its background write)",
                "killed by SIGKILL"),
    signal_case("S03", 1, "SIGKILL", "after_save", 2, "SIGKILL to rank 1 after a save", "killed by SIGKILL"),
    signal_case("S04", 0, "SIGINT", "before_save", 1, "SIGINT to rank 0 before the first save", "KeyboardInterrupt"),
    signal_case("S05", 1, "SIGINT", "during_save", 2, "SIGINT to rank 1 during a save (staging)", "KeyboardInterrupt"),
    signal_case("S06", 0, "SIGINT", "after_save", 2, "SIGINT to rank 0 after a save", "KeyboardInterrupt"),
    signal_case("S07", 1, "SIGTERM", "before_save", 1, "SIGTERM to rank 1 before the first save", "killed by SIGTERM"),
    signal_case("S08", 0, "SIGTERM", "during_save", 2, "SIGTERM to rank 0 during a save (its background write)",
                "killed by SIGTERM"),
    signal_case("S09", 1, "SIGTERM", "after_save", 2, "SIGTERM to rank 1 after a save", "killed by SIGTERM"),
]
SIGNAL_BLOCKS = 16  # 8 steps: S03, S06, S09 move on by one checkpoint each

# A stopped rank is named by the other's collective timing out (the stopped one leaves no
# record: torchrun kills its wrapper).
TIMED_OUT = "Timed out waiting 18000ms for "  # a send or a recv, whichever gloo waited on
STOPS = [
    Case("T01", "SIGSTOP to rank 1 before the first save",
         {"kind": "signal", "rank": 1, "signal": "SIGSTOP", "point": "before_save", "step": 1}, 0, TIMED_OUT),
    Case("T02", "SIGSTOP to rank 0 during a save (its background write)",
         {"kind": "signal", "rank": 0, "signal": "SIGSTOP", "point": "during_save", "step": 2}, 1, TIMED_OUT),
]
STOPS_LAST = Case("T03", "SIGSTOP to rank 1 after a save (the restart budget spent)",
                  {"kind": "signal", "rank": 1, "signal": "SIGSTOP", "point": "after_save", "step": 2}, 0, TIMED_OUT,
                  action="stop", exit_code=75, decision="stop: budget spent")
STOP_BLOCKS = 12

# Storage and directories (chain in a folder where chattr +i works). Paths are filled in by
# the test: CKPT, MODEL, PACK, HB (this node's heartbeat folder).
STORAGE = [
    Case("D01", "EPERM on the metrics file (chattr +i train-metrics.jsonl)",
         {"kind": "none", "before": [["chattr", "+i", "CKPT/train-metrics.jsonl"]]}, 0,
         "PermissionError: [Errno 1] Operation not permitted: 'TMP/ckpt/train-metrics.jsonl' (in load)"),
    Case("D02", "EPERM on the checkpoint folder (chattr +i CKPT): the save cannot make its folder",
         {"kind": "none", "before": [["chattr", "-i", "CKPT/train-metrics.jsonl"], ["chattr", "+i", "CKPT"]]}, 0,
         "PermissionError: [Errno 1] Operation not permitted: 'TMP/ckpt/.step-00000002.tmp-… (in save (step 2))"),
    Case("D03", "the model directory removed during the save of step 2",
         {"kind": "act", "rank": 0, "when": "save", "step": 2, "actions": [["rename_away", "MODEL"]],
          "before": [["chattr", "-i", "CKPT"]]}, 0,
         "SaveFailed: checkpoint step-00000002: the background save failed on rank 0: FileNotFoundError: [Errno 2] "
         "No such file or directory: 'TMP/model/config.json'… (in save (step 2, written in the background))"),
]
STORAGE_LAST = Case("D04", "the pack directory removed during the save of step 2 (the ranks hold it open)",
                    {"kind": "act", "rank": 0, "when": "save", "step": 2, "actions": [["rename_away", "PACK"]],
                     "before": [["restore", "MODEL"]]}, action="done", exit_code=0, decision="done")
STORAGE_BLOCKS = 8

SIGNALS_LAST = Case("S10", "EPERM on rank 1's heartbeat file (chattr +i): the heartbeat warns, training goes on",
                    {"kind": "none", "before_rank": 1, "before": [["chattr", "+i", "HB/rank-1.json"]]},
                    action="done", exit_code=0, decision="done")

GONE_AT_START = [
    Case("G01", "the model directory missing at start", {}, action="gate refused", exit_code=1,
         decision="gate refused"),
    Case("G02", "the pack directory missing at start", {}, action="gate refused", exit_code=1,
         decision="gate refused"),
    Case("G03", "the model directory missing at start, started anyway (--accept-gate-fail)", {}, 0,
         "TMP/run.toml: model.path TMP/no-such-model: no such directory", action="stop", exit_code=65, decision="stop: refused"),
    Case("G04", "the pack directory missing at start, started anyway (--accept-gate-fail)", {}, 0,
         "data.pack_dir TMP/no-such-pack: no such directory", action="stop", exit_code=65, decision="stop: refused"),
]

FULL = [
    Case("N01", "ENOSPC at the second save (a tmpfs checkpoint folder with room for 1.5 checkpoints)", {}, 0,
         "SaveFailed: checkpoint step-00000004: the background save failed on rank 0: … (in save (step 4, written in "
         "the background))"),
    Case("N02", "ENOSPC again at the same save, the next attempt (retry.max_no_progress = 1)", {}, 0,
         "SaveFailed: checkpoint step-00000004: the background save failed on rank 0: … (in save (step 4, written in "
         "the background))", action="stop", exit_code=74, decision="stop: no progress"),
    Case("N03", "EROFS: the checkpoint folder a read-only bind mount (retry.max_no_progress = 1)", {}, 0,
         "OSError: [Errno 30] Read-only file system: 'TMP/ckpt/train-metrics.jsonl' (in load)", action="stop",
         exit_code=74, decision="stop: no progress"),
]

DEADLOCKS = [
    Case("X01", "the report's deadlock: evenfix off, blocks [12, 8]: rank 1 enters the final save's barrier, "
         "rank 0 the forward of step 5", {}, action="stop", exit_code=93, decision="stop: desync", conclusive=True),
    Case("X02", "the same with rank 0 short: blocks [8, 12]", {}, action="stop", exit_code=93,
         decision="stop: desync", conclusive=True),
]

RECORDS = [
    Case("R01", "the launcher's records on the full tmpfs too (the checkpoint folder's launch/)", {},
         action="error", exit_code=74, decision="error: a record cannot be written"),
    Case("R02", "the launcher's session and attempt folders made immutable mid-run (chattr +i)", {},
         action="error", exit_code=74, decision="error: a record cannot be written"),
]


def decision_kind(d: dict) -> str:
    """The decision's kind, from its action and reason (launch/judge.h's branches)."""
    reason = d["reason"]
    if d["action"] == "restart":
        return "restart"
    if d["action"] == "done":
        return "done"
    for needle, kind in (("deterministic collective desync", "stop: desync"),
                         ("without a new verified checkpoint", "stop: no progress"),
                         ("restart budget spent", "stop: budget spent"),
                         ("the trainer refused the configuration", "stop: refused"),
                         ("cancelled", "stop: cancelled")):
        if needle in reason:
            return kind
    return "stop: " + reason[:40]
