#!/usr/bin/env python3
"""Writes the flight-recorder fixtures under testdata/fr/ (one folder per case,
one file per rank, named nccl_trace_rank_<rank>) the way torch writes them:
the pickle that torch's C++ pickler emits (protocol 2, strings memoized by
value, shared frame dicts memoized by identity, BINPUT after a container is
closed), or the JSON form (keys sorted, no frames, None -> 0, pg_status values
as strings). The cases mirror fr_trace's test suite (type, size, dtype and
state mismatch, missing rank, coalesced groups, p2p) plus bad input.
Deterministic: rerunning rewrites identical bytes.
    python3 tools/fr/make_fixtures.py [testdata/fr]
"""
import json
import os
import shutil
import struct
import sys

PREFIX = "nccl_trace_rank_"
T0 = 1718000000000000000


class Shared:
    """A container torch would see with use_count() > 1 (memoized by identity)."""
    def __init__(self, value):
        self.value = value


class TorchPickler:
    def __init__(self):
        self.out = bytearray()
        self.next_id = 0
        self.strings = {}
        self.objects = {}

    def _put(self):
        i = self.next_id
        self.out += (b"q" + bytes([i])) if i < 256 else (b"r" + struct.pack("<I", i))
        self.next_id += 1
        return i

    def _get(self, i):
        self.out += (b"h" + bytes([i])) if i < 256 else (b"j" + struct.pack("<I", i))

    def _int(self, n):
        if 0 <= n < 256:
            self.out += b"K" + bytes([n])
        elif 0 <= n < 65536:
            self.out += b"M" + struct.pack("<H", n)
        elif -2**31 <= n < 2**31:
            self.out += b"J" + struct.pack("<i", n)
        else:
            self.out += b"\x8a\x08" + struct.pack("<q", n)

    def value(self, v):
        if isinstance(v, Shared):
            if id(v) in self.objects:
                return self._get(self.objects[id(v)])
            self._plain(v.value)
            self.objects[id(v)] = self._put()
            return
        self._plain(v)

    def _plain(self, v):
        if v is None:
            self.out += b"N"
        elif v is True:
            self.out += b"\x88"
        elif v is False:
            self.out += b"\x89"
        elif isinstance(v, int):
            self._int(v)
        elif isinstance(v, float):
            self.out += b"G" + struct.pack(">d", v)
        elif isinstance(v, str):
            if v in self.strings:
                return self._get(self.strings[v])
            raw = v.encode()
            self.out += b"X" + struct.pack("<I", len(raw)) + raw
            self.strings[v] = self._put()
        elif isinstance(v, tuple):
            for x in v:
                self.value(x)
            self.out += {1: b"\x85", 2: b"\x86", 3: b"\x87"}[len(v)]
        elif isinstance(v, list):
            self.out += b"]("
            for x in v:
                self.value(x)
            self.out += b"e"
        elif isinstance(v, dict):
            self.out += b"}("
            for k, x in v.items():
                self.value(k)
                self.value(x)
            self.out += b"u"
        else:
            raise TypeError(type(v))

    def dumps(self, top):
        self.out += b"\x80\x02"
        self.value(Shared(top))
        self.out += b"."
        return bytes(self.out)


def to_json(top):
    def norm(v, key=None):
        if isinstance(v, Shared):
            return norm(v.value)
        if isinstance(v, tuple):
            return [norm(x) for x in v]
        if isinstance(v, list):
            return [norm(x) for x in v]
        if isinstance(v, dict):
            return {k: norm(x, k) for k, x in v.items() if k != "frames"}
        if v is None and key and key.startswith("time_discovered"):
            return 0
        return v
    d = norm(top)
    d = {**d, "pg_status": {k: {kk: str(vv) for kk, vv in s.items()} for k, s in d["pg_status"].items()},
         "nccl_comm_state": {}}
    if not d.get("entries"):
        d.pop("entries", None)
    return json.dumps(d, sort_keys=True, separators=(",", ":"))


FRAME_TRAIN = Shared({"name": "train_step", "filename": "/job/train.py", "line": 88})
FRAME_RS = Shared({"name": "reduce_scatter", "filename": "torch/distributed/distributed_c10d.py", "line": 4517})
FRAME_AR = Shared({"name": "all_reduce", "filename": "torch/distributed/distributed_c10d.py", "line": 2806})
FRAME_BARRIER = Shared({"name": "barrier", "filename": "torch/distributed/distributed_c10d.py", "line": 4730})
FRAME_SAVE = Shared({"name": "save_checkpoint", "filename": "/job/train.py", "line": 141})


class Rank:
    """Builds one rank's entries in record order."""
    def __init__(self, rank, version="2.10", pg_ranks=(0, 1, 2, 3), frames=True):
        self.rank, self.version, self.frames = rank, version, frames
        self.pg_ranks = list(pg_ranks)
        self.entries = []
        self.seq = 0
        self.p2p = 0
        self.op = 0

    def add(self, name, ins, outs, state="completed", dtype="Float", out_dtype=None, seq=None, p2p=False,
            frames=None, lib="nccl", p2p_seq=None):
        if seq is None:
            if not p2p:
                self.seq += 1
            seq = self.seq
        else:
            self.seq = seq
        if p2p:
            self.p2p = p2p_seq if p2p_seq is not None else self.p2p + 1
        self.op += 1
        t = T0 + 1_000_000 * len(self.entries) + self.rank * 1000
        e = {}
        if self.frames:
            e["frames"] = frames if frames is not None else [FRAME_TRAIN]
        e.update({"record_id": len(self.entries), "pg_id": 0, "process_group": ("0", "default_pg"),
                  "thread_name": "pt_main_thread", "thread_id": str(140245123456768 + self.rank),
                  "collective_seq_id": seq, "p2p_seq_id": self.p2p if p2p else 0, "op_id": self.op,
                  "profiling_name": f"{lib}:{name}", "time_created_ns": t})
        if state == "completed":
            e["duration_ms"] = 0.25
        e.update({"input_sizes": ins, "input_dtypes": [dtype] * len(ins),
                  "output_sizes": outs, "output_dtypes": [out_dtype or dtype] * len(outs),
                  "state": state,
                  "time_discovered_started_ns": t + 1000 if state != "scheduled" else None,
                  "time_discovered_completed_ns": t + 2000 if state == "completed" else None,
                  "retired": state == "completed", "timeout_ms": 600000, "is_p2p": p2p})
        self.entries.append(e)
        return self

    def top(self):
        last = {"completed": -1, "started": -1}
        for e in self.entries:
            if not e["is_p2p"]:
                for s in ("completed", "started"):
                    if e["state"] == "completed" or (s == "started" and e["state"] == "started"):
                        last[s] = e["collective_seq_id"]
        major, minor = map(int, self.version.split("."))
        top = {"version": self.version,
               "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": str(self.pg_ranks)}}}
        if (major, minor) >= (2, 10):
            top["comm_lib_version"] = "2.21.5"
        elif (major, minor) >= (2, 7):
            top["nccl_version"] = "2.21.5"
        top["pg_status"] = {"0": {"last_enqueued_collective": self.seq,
                                  "last_started_collective": last["started"],
                                  "last_completed_collective": last["completed"]}}
        top["entries"] = self.entries
        return top


def write_case(root, name, ranks, json_too=False):
    d = os.path.join(root, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    for r in ranks:
        with open(os.path.join(d, f"{PREFIX}{r.rank}"), "wb") as f:
            f.write(TorchPickler().dumps(r.top()))
    if json_too:
        dj = d + "_json"
        shutil.rmtree(dj, ignore_errors=True)
        os.makedirs(dj)
        for r in ranks:
            with open(os.path.join(dj, f"{PREFIX}{r.rank}"), "w") as f:
                f.write(to_json(r.top()))


def warmup(r):
    r.add("all_reduce", [[1024]], [[1024]], frames=[FRAME_AR, FRAME_TRAIN])
    r.add("_all_gather_base", [[256]], [[1024]])
    return r


def desync_world(odd_rank, odd):
    """4 ranks; at seq 3 the odd rank does `odd(rank)`, the others a reduce_scatter."""
    ranks = []
    for i in range(4):
        r = warmup(Rank(i))
        if i == odd_rank:
            odd(r)
        else:
            r.add("reduce_scatter", [[4, 256]], [[256]], state="started", frames=[FRAME_RS, FRAME_TRAIN])
        ranks.append(r)
    return ranks


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..", "testdata", "fr")
    barrier = lambda r: r.add("all_reduce_barrier", [[1]], [[1]], state="started", frames=[FRAME_BARRIER, FRAME_SAVE])
    # The report's hang, in small: rank 3 in the save barrier, the rest in reduce_scatter.
    write_case(root, "type_mismatch", desync_world(3, barrier), json_too=True)
    # The same with rank 0 as the odd one: fr_trace (rank 0 listed first) blames 1-3.
    write_case(root, "type_mismatch_rank0", desync_world(0, barrier))
    write_case(root, "size_mismatch", desync_world(
        3, lambda r: r.add("reduce_scatter", [[4, 128]], [[256]], state="started")))
    write_case(root, "state_mismatch", desync_world(
        3, lambda r: r.add("reduce_scatter", [[4, 256]], [[256]], state="completed")))
    write_case(root, "missing_rank", desync_world(3, lambda r: r))
    # Both ranks in the same gather of a sharded parameter, recorded as gloo
    # records a DTensor full_tensor() ([[N, 32]] -> [[1, N, 32]]): fr_trace's
    # per-rank element-count rule fails on each rank alike; the ranks agree.
    ag = []
    for i in range(2):
        r = Rank(i, pg_ranks=(0, 1)).add("all_reduce", [[8]], [[8]], lib="gloo", state="scheduled")
        r.add("all_gather", [[64128, 32]], [[1, 64128, 32]], lib="gloo", state="scheduled")
        ag.append(r)
    write_case(root, "allgather_own_numel", ag)
    # The same all_reduce with sizes that differ across ranks: [[10]] vs [[12]].
    cs = [Rank(i, pg_ranks=(0, 1)).add("all_reduce", [[8]], [[8]]) for i in range(2)]
    for i, r in enumerate(cs):
        r.add("all_reduce", [[10 + 2 * i]], [[10 + 2 * i]], state="started")
    write_case(root, "cross_rank_size", cs)
    # fr_trace's dtype case: output float16 vs float32 on a completed all_reduce.
    dt = [Rank(i, pg_ranks=(0, 1)).add("all_reduce", [[4, 4]], [[4, 4]]) for i in range(2)]
    for i, r in enumerate(dt):
        r.add("all_reduce", [[4, 4]], [[4, 4]], dtype="Float", out_dtype="Half" if i == 1 else "Float")
    write_case(root, "dtype_mismatch", dt)
    # Coalesced groups (2.8, testBuildDB cases 3 and 4): broadcast x2 + end marker
    # match; then _broadcast_oop [[5,5]] on rank 0 vs [[4,4]] on rank 1 inside a group.
    co = []
    for i in range(2):
        r = Rank(i, version="2.8", pg_ranks=(0, 1))
        r.add("broadcast", [[4, 4]], [[4, 4]], seq=1).add("broadcast", [[4, 4]], [[4, 4]], seq=1)
        r.add("coalesced", [], [], seq=1)
        r.add("_broadcast_oop", [[4, 4]], [[4, 4]], seq=2)
        r.add("_broadcast_oop", [[5, 5]] if i == 0 else [[4, 4]], [[5, 5]] if i == 0 else [[4, 4]], seq=2)
        r.add("ALLGATHER_coalesced", [], [], seq=2)
        co.append(r)
    write_case(root, "coalesced", co)
    # P2P: a matched send/recv, a matched coalesced batch of two sends, then a
    # send of [[16]] met by a recv of [[8]].
    pp = []
    for i in range(2):
        r = Rank(i, pg_ranks=(0, 1))
        r.add("all_reduce", [[8]], [[8]]).add("all_reduce", [[8]], [[8]])
        me, peer = i, 1 - i
        if i == 0:
            r.add(f"send {me}->{peer}", [[8]], [[8]], p2p=True)
        else:
            r.add(f"recv {me}<-{peer}", [[8]], [[8]], p2p=True)
        # A batch_isend_irecv of two sends 0->1 (fr_trace looks a recv's partner
        # up in the recv's own list, so only a send-first batch passes there too).
        op = f"send {me}->{peer}" if i == 0 else f"recv {me}<-{peer}"
        for sz in ([[4]], [[6]]):
            r.add(op, sz, sz, seq=r.seq, p2p=True, p2p_seq=2)
        r.add("coalesced", [], [], seq=r.seq, p2p=True, p2p_seq=2)
        if i == 0:
            r.add(f"send {me}->{peer}", [[16]], [[16]], state="started", p2p=True)
        else:
            r.add(f"recv {me}<-{peer}", [[8]], [[8]], state="started", p2p=True)
        pp.append(r)
    write_case(root, "p2p", pp)
    # Format 1.4: int-keyed pg_config, one seq_id, no process_group or dtypes.
    v1 = os.path.join(root, "v1_type_mismatch")
    shutil.rmtree(v1, ignore_errors=True)
    os.makedirs(v1)
    for i in range(2):
        ents = []
        for k, name in enumerate(["nccl:all_reduce", "nccl:all_reduce" if i == 0 else "nccl:broadcast"]):
            ents.append({"record_id": k, "pg_id": 0, "seq_id": k + 1, "op_id": k + 1, "profiling_name": name,
                         "time_created_ns": T0 + k, "input_sizes": [[64]], "output_sizes": [[64]],
                         "state": "completed" if k == 0 else "scheduled", "time_discovered_started_ns": None,
                         "time_discovered_completed_ns": None, "retired": k == 0, "frames": []})
        top = {"entries": ents, "version": "1.4", "pg_config": {0: [0, 1]}, "nccl_comm_state": {}}
        with open(os.path.join(v1, f"{PREFIX}{i}"), "wb") as f:
            f.write(TorchPickler().dumps(top))
    # Bad input: ranks 0-1 good; 2 truncated; 3 a GLOBAL opcode where an int
    # was; 4 version 3.0; 5 from a job of 8 ranks; world of 6.
    bad = os.path.join(root, "bad_input")
    shutil.rmtree(bad, ignore_errors=True)
    os.makedirs(bad)
    world = tuple(range(6))
    def good(i, pg=world, version="2.10"):
        r = Rank(i, pg_ranks=pg, version=version)
        r.add("all_reduce", [[16]], [[16]]).add("all_reduce", [[16]], [[16]], state="started")
        return TorchPickler().dumps(r.top())
    for i in range(2):
        open(os.path.join(bad, f"{PREFIX}{i}"), "wb").write(good(i))
    whole = good(2)
    open(os.path.join(bad, f"{PREFIX}2"), "wb").write(whole[: len(whole) // 2])
    data = bytearray(good(3))
    at = data.index(b"record_id") + len(b"record_id") + 2   # after the key's BINPUT
    data[at:at + 2] = b"cX"                                  # GLOBAL opcode instead of BININT1
    open(os.path.join(bad, f"{PREFIX}3"), "wb").write(bytes(data))
    open(os.path.join(bad, f"{PREFIX}4"), "wb").write(good(4, version="3.0"))
    open(os.path.join(bad, f"{PREFIX}5"), "wb").write(good(5, pg=tuple(range(8))))


if __name__ == "__main__":
    main()
