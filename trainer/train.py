#!/usr/bin/env python3
"""The reference trainer lives in the evenkeel package (python/evenkeel/train.py), so
`python -m evenkeel.train RUN.toml` works wherever evenkeel is installed. This file
keeps `torchrun ... trainer/train.py RUN.toml` working in a source tree."""

import gc
import os
import sys

if __name__ == "__main__":
    gc.disable()  # as the module does: no collection during a rank's start-up (evenkeel.train.start_up_done)

from evenkeel.train import main  # noqa: E402

if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # as the module does: skip interpreter teardown (docs/trainer.md)
