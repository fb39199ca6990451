import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from packs import make_tiny_model  # noqa: E402


@pytest.fixture(scope="session")
def qwen3_model(tmp_path_factory) -> Path:
    """A tiny Qwen3 (hidden 64, 2 layers, Qwen3's real 151,936-row vocabulary and
    tokenizer) saved by transformers: the stand-in for a pretrained model."""
    return make_tiny_model("qwen3", tmp_path_factory.mktemp("models") / "tiny-qwen3")


@pytest.fixture(scope="session")
def llama_model(tmp_path_factory) -> Path:
    """A tiny Llama with Llama 3's real tokenizer and 128,256-row vocabulary."""
    return make_tiny_model("llama", tmp_path_factory.mktemp("models") / "tiny-llama")
