import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "trainer"))

from packs import qwen3_model  # noqa: E402,F401  (fixture)
