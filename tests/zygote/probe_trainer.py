"""A trainer that only reports what it sees at start-up, as JSON on stdout, or into the file
its argument names when it is `--out FILE` (the name ends in _trainer.py for the zygote
client's filter); it exits with EK_PROBE_EXIT. Run fresh and through the rank zygote
(tests/trainer/test_zygote.py), the two must report the same."""
import json
import os
import sys

import torch

seen = json.dumps({
    "argv": sys.argv,
    "cwd": os.getcwd(),
    "path0": sys.path[0],
    "threads": torch.get_num_threads(),
    "omp": os.environ.get("OMP_NUM_THREADS"),
    "served": os.getppid() != int(os.environ.get("EK_PROBE_PARENT", "0")),
})
if sys.argv[1:2] == ["--out"]:
    with open(sys.argv[2], "w") as f:
        f.write(seen)
else:
    print(seen)
sys.exit(int(os.environ.get("EK_PROBE_EXIT", "0")))
