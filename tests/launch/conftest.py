"""tests/trainer's helpers (packs.py) on the path; the models are tests/conftest.py's
(one per session, shared with tests/trainer and the other suites)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "trainer"))
