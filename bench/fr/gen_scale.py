#!/usr/bin/env python3
"""Generates a scale test for `evenkeel fr`: RANKS dumps of ENTRIES entries each
(v2.10 pickle as torch writes it, stack frames included), all ranks in step
until the last slot, where rank 3 enters the save barrier's all_reduce while
the others are in reduce_scatter.
    python3 bench/fr/gen_scale.py OUT_DIR [RANKS=1024] [ENTRIES=2000]
Ranks are written from two pickled images (the in-step ranks differ only in
their file name), which keeps generation at seconds; the reader still parses
every file.
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools", "fr"))
from make_fixtures import PREFIX, Rank, TorchPickler, FRAME_AR, FRAME_RS, FRAME_TRAIN, FRAME_BARRIER, FRAME_SAVE  # noqa


def image(rank, world, entries, odd):
    r = Rank(rank, pg_ranks=tuple(range(world)))
    n = 0
    while n < entries - 1:
        r.add("_all_gather_base", [[256]], [[256 * world]],
              frames=[FRAME_TRAIN])
        r.add("reduce_scatter", [[world, 256]], [[256]], frames=[FRAME_RS, FRAME_TRAIN])
        n += 2
    while n < entries - 1:
        r.add("all_reduce", [[1024]], [[1024]], frames=[FRAME_AR, FRAME_TRAIN])
        n += 1
    if odd:
        r.add("all_reduce_barrier", [[1]], [[1]], state="started", frames=[FRAME_BARRIER, FRAME_SAVE])
    else:
        r.add("reduce_scatter", [[world, 256]], [[256]], state="started", frames=[FRAME_RS, FRAME_TRAIN])
    r.entries = r.entries[-entries:]
    return TorchPickler().dumps(r.top())


def main():
    out = sys.argv[1]
    world = int(sys.argv[2]) if len(sys.argv) > 2 else 1024
    entries = int(sys.argv[3]) if len(sys.argv) > 3 else 2000
    os.makedirs(out, exist_ok=True)
    normal = image(0, world, entries, False)
    odd = image(3, world, entries, True)
    for r in range(world):
        with open(os.path.join(out, f"{PREFIX}{r}"), "wb") as f:
            f.write(odd if r == 3 else normal)
    print(f"{world} dumps x {entries} entries, {len(normal)} bytes each, in {out}")


if __name__ == "__main__":
    main()
