"""Every rank's view of the resume against rank 0's choice (evenkeel.resume.resume_disagreement,
docs/launch.md "Resume"): what each rank's launcher handed over and the chosen manifest's
xxh3 as each node sees it. The first disagreement is named with both sides."""

from __future__ import annotations

from evenkeel.resume import resume_disagreement

CKPT = "/nfs/ckpt/step-00000010"
CHOSEN = {"path": CKPT, "step": 10, "manifest_xxh3": "0123456789abcdef"}


def view(host: str, handed: str = CKPT, digest: str = "0123456789abcdef", sees: str = "0123456789abcdef") -> dict:
    return {"host": host, "handed": handed, "digest": digest, "sees": sees}


def test_views_that_agree_are_no_disagreement():
    assert resume_disagreement([view("n1"), view("n1"), view("n2"), view("n2")], CHOSEN) is None
    # From the start, as every launcher handed: nothing to read.
    none = {"handed": "none", "digest": "", "sees": ""}
    assert resume_disagreement([{"host": "n1", **none}, {"host": "n2", **none}], None) is None
    # Run by hand: no rank was handed anything.
    bare = {"handed": "", "digest": "", "sees": "0123456789abcdef"}
    assert resume_disagreement([{"host": "n1", **bare}, {"host": "n2", **bare}], CHOSEN) is None


def test_a_rank_handed_another_checkpoint_is_named_with_rank_0s():
    other = "/nfs/ckpt/step-00000020"
    got = resume_disagreement([view("n1"), view("n1"), view("n2", handed=other), view("n2", handed=other)], CHOSEN)
    assert got == (f"rank 2 on n2 was handed EVENKEEL_RESUME_FROM={other} (EVENKEEL_RESUME_MANIFEST_XXH3="
                   f"0123456789abcdef), but rank 0 on n1 was handed EVENKEEL_RESUME_FROM={CKPT} "
                   "(EVENKEEL_RESUME_MANIFEST_XXH3=0123456789abcdef): the launchers disagree on the checkpoint to "
                   "resume from (every node's launcher must hand node 0's choice)"), got
    # A node whose launcher handed nothing (an older launcher) disagrees too.
    got = resume_disagreement([view("n1"), view("n2", handed="", digest="")], CHOSEN)
    assert got.startswith("rank 1 on n2 was handed no EVENKEEL_RESUME_FROM, but rank 0 on n1 was handed "), got


def test_a_node_that_sees_another_manifest_at_the_same_path_is_named():
    got = resume_disagreement([view("n1"), view("n2", sees="fedcba9876543210")], CHOSEN)
    assert got == (f"rank 1 on n2 sees {CKPT}/evenkeel-checkpoint.json with xxh3 fedcba9876543210, but rank 0 on n1 "
                   "chose it with xxh3 0123456789abcdef: the nodes do not see the same checkpoint (checkpoint.dir "
                   "must be storage every node shares)"), got
    missing = "unreadable (No such file or directory)"
    got = resume_disagreement([view("n1"), view("n2", sees=missing)], CHOSEN)
    assert f"with xxh3 {missing}" in got, got
