"""A trainer that only reports what it sees at start-up, as JSON on stdout (the name ends
in _trainer.py for the zygote client's filter). Run fresh and through the rank zygote
(tests/trainer/test_zygote.py), the two must print the same."""
import json
import os
import sys

import torch

print(json.dumps({
    "argv": sys.argv,
    "cwd": os.getcwd(),
    "path0": sys.path[0],
    "threads": torch.get_num_threads(),
    "omp": os.environ.get("OMP_NUM_THREADS"),
    "served": os.getppid() != int(os.environ.get("EK_PROBE_PARENT", "0")),
}))
