#!/usr/bin/env bash
# Builds build-san: clang-14 with ASan + UBSan, every library also built with libFuzzer's
# coverage, for the unit tests under the sanitizers and the fuzz/ harnesses (one build for
# both). scripts/test.sh runs it in the background; run it alone to rebuild build-san.
set -euo pipefail
ROOT=${1:-$(cd "$(dirname "$0")/.." && pwd)}
CC=clang-14 CXX=clang++-14 cmake -S "$ROOT" -B "$ROOT/build-san" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DEK_SANITIZE=ON -DEK_FUZZ=ON -DEK_BUILD_BENCH=OFF -DCMAKE_UNITY_BUILD=ON -DCMAKE_CXX_COMPILER_LAUNCHER=ccache \
  -DCMAKE_C_COMPILER_LAUNCHER=ccache -DEK_COMPONENTS=all >/dev/null
cmake --build "$ROOT/build-san" -j"$(nproc)" --target unit_tests fuzzers
