#!/usr/bin/env bash
# Sets up, builds and runs every test. Exit status is non-zero if any test fails.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cd build
# Tokenizer parity against Hugging Face (tests/CMakeLists.txt) is part of every test run;
# a build where those tests went missing must not pass.
if ! grep -q tokenize_parity_corpus_qwen3 <<<"$(ctest -N)"; then
  echo "test: error: the tokenizer parity tests are not registered (tests/CMakeLists.txt)" >&2
  exit 1
fi
ctest --output-on-failure -j"$(nproc)"
