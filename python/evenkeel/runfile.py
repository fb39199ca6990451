"""RunFile: run.toml as the C++ core parses and validates it (docs/run_format.md).

    run = RunFile("run.toml")
    run.train.micro_batch, run.checkpoint.dir, run.model.path   # paths resolved
    run.xxh3                                                   # the file's identity
    RunFile("run.toml", ["train.lr=2e-5"])                     # a key overridden (--set)

Sections and keys are named exactly as in the TOML. There is no Python parser of
the file: what the gate checks is what the trainer reads. Overrides
("section.key=value", the trainer's --set) are applied by the same C++ parser,
with the file's unknown-key and type errors; `xxh3` stays the file's and
`overrides` lists them (docs/run_format.md, "Overriding a key").
"""

from __future__ import annotations

import json
import os
from types import SimpleNamespace
from typing import Sequence

from evenkeel import _core

__all__ = ["RunFile"]


class RunFile:
    def __init__(self, path: str | os.PathLike, overrides: Sequence[str] = ()):
        self.path = os.fspath(path)
        data = json.loads(_core.read_run_file(self.path, [str(o) for o in overrides]))
        self._data = data
        self.xxh3: str = data["xxh3"]
        self.overrides: list[str] = list(data["overrides"])
        self.world: int = data["world"]
        self.config_path: str = data["config_path"]
        for section, keys in data.items():
            if isinstance(keys, dict):
                setattr(self, section, SimpleNamespace(**keys))

    @property
    def identity(self) -> str:
        """``run.toml (xxh3 0123456789abcdef)``, as the gate's pass log records it."""
        return f"{self.path} (xxh3 {self.xxh3})"

    def as_dict(self) -> dict:
        return json.loads(json.dumps(self._data))

    def __repr__(self) -> str:
        return f"RunFile({self.path!r}, name={self.run.name!r}, world={self.world}, xxh3={self.xxh3})"
