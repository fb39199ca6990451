"""tests/trainer's helpers (packs.py) on the path; its fixtures are tests/conftest.py's."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
