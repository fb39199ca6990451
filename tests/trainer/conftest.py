import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from packs import llama_model, qwen3_model  # noqa: E402,F401  (fixtures)
