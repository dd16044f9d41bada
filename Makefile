# docpipe — the two commands a newcomer needs:
#   make demo   provision everything, process sample contracts end to end, print SQL results
#   make test   provision everything, run the whole test suite
# Both are idempotent and quick when everything is already there.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

export DOCPIPE_HOME ?= $(HOME)/.cache/docpipe
export LIBTORCH ?= $(DOCPIPE_HOME)/libtorch-2.11.0/torch
export DOCPIPE_MODEL ?= $(DOCPIPE_HOME)/embeddinggemma-300m
SERVICES_ENV := $(DOCPIPE_HOME)/run/env.sh
# the tests' own database (services.sh creates docpipe_test beside docpipe): what they store
# never reaches `make demo` or a real run
TEST_ENV := source $(SERVICES_ENV) && export DOCPIPE_DATABASE_URL=$${DOCPIPE_TEST_DATABASE_URL:?no DOCPIPE_TEST_DATABASE_URL in $(SERVICES_ENV): run make services}
CARGO ?= cargo

.PHONY: decoder decoder-small demo test bench bench-pipeline bench-decode bench-ocr eval eval-fields eval-ocr train-clauses learning-curve fault-test provision libtorch model ocr services services-down build

provision: libtorch model ocr decoder-small services

libtorch:
	@scripts/provision.sh libtorch

model:
	@scripts/provision.sh model

ocr:
	@scripts/provision.sh ocr

# the generative models (GGUF): the default for `docpipe generate`, and the small one for tests
decoder:
	@scripts/provision.sh decoder

decoder-small:
	@scripts/provision.sh decoder-small

services:
	@scripts/services.sh up >/dev/null

services-down:
	@scripts/services.sh down

build: libtorch
	$(CARGO) build --bin docpipe -p docpipe -p docpipe-text --bin docpipe-extract

test: provision
	$(TEST_ENV) && $(CARGO) test --workspace --no-fail-fast
	$(MAKE) --no-print-directory fault-test

# Faults injected into real runs (kill -9 a worker, restart RabbitMQ, restart Postgres).
fault-test: provision build
	$(TEST_ENV) && tests/fault-test.sh

demo: provision decoder build
	source $(SERVICES_ENV) && scripts/demo.sh

# Clause-label evaluation: the whole pipeline on labelled PDFs, then recall@1/@5 and presence
# precision/recall per category of the shipped clause scorer (FOLDS=5: scorers learned under
# cross-validation on the labelled PDFs instead). Last line: `recall@5 X.XX`.
LABELS ?= ../shared/corpus/contracts/cuad_labels.tsv
PDFS ?= ../shared/corpus/contracts
FOLDS ?= 0
eval: provision build
	source $(SERVICES_ENV) && EVAL_FOLDS=$(FOLDS) scripts/eval.sh "$(LABELS)" "$(PDFS)"

# Contract fields against CUAD's answers: the pipeline on LABELS/PDFS (as `make eval`), then
# the decoder's answers for each contract and a rule-based baseline, per field. Last line:
# `fields_accuracy X.XX`. EVAL_BUCKET reuses the documents of `make eval`.
eval-fields: provision decoder build
	source $(SERVICES_ENV) && EVAL_SCORE=fields scripts/eval.sh "$(LABELS)" "$(PDFS)"

# Train the shipped clause scorer (crates/clauses/scorers/) on CUAD's training contracts; the
# embedded segments are cached, so an interrupted run resumes. No services needed. Every chunk of
# every contract is embedded (7.6 M tokens for the 430: 47 min in all on a 2-core AMX Xeon; the
# embedding alone ~2 h 15 min where the model runs at ~930 tokens/s);
# TRAIN_FLAGS="--positive-chunks 3 --random-chunks 1"
# embeds about 40 % of them (clause-scorer-v4's recipe; docs/clause-scorer.md).
TRAIN_LABELS ?= ../shared/corpus/cuad-train/cuad_labels.tsv
TRAIN_PDFS ?= ../shared/corpus/cuad-train
TRAIN_FLAGS ?=
train-clauses: libtorch model ocr build
	target/debug/docpipe train-clauses --labels "$(TRAIN_LABELS)" --pdfs "$(TRAIN_PDFS)" $(TRAIN_FLAGS)

# Recall@5 on LABELS/PDFS of scorers trained on nested subsets of the training contracts
# (0 = all); reuses the training cache, embeds LABELS/PDFS once (`docpipe eval --pdfs`).
CURVE ?= 50 100 200 0
learning-curve: libtorch model ocr build
	scripts/learning-curve.sh "$(TRAIN_LABELS)" "$(TRAIN_PDFS)" "$(LABELS)" "$(PDFS)" $(CURVE)

# OCR accuracy: pages of born-digital PDFs rendered at OCR_DPI and read by Tesseract, against
# their own text layer. Last line: `ocr_cer X.XXXX`.
OCR_DOCS ?= 10
OCR_PAGES ?= 2
OCR_DPI ?= 200
eval-ocr: ocr build
	target/debug/docpipe eval-ocr --pdfs "$(PDFS)" --docs $(OCR_DOCS) --pages-per-doc $(OCR_PAGES) --ocr-dpi $(OCR_DPI)

# OCR's end-to-end cost: the same contracts run born-digital, then with every other one a scan.
bench-ocr: provision build
	source $(SERVICES_ENV) && scripts/ocr-mixed.sh

# Forward pass vs sentence-transformers, same chunks and threads, one run (installs the reference).
bench: libtorch model
	$(CARGO) build --bin docpipe -p docpipe -p docpipe-text --bin docpipe-extract
	$(CARGO) build -p docpipe-model --example forward_bench
	scripts/bench.sh

# The whole pipeline on BENCH_DOCS contracts (0: every PDF of BENCH_CORPUS, 35 by default) with
# a per-stage breakdown, against the forward pass on their chunks in the same run. Last lines:
# `pipeline_vs_forward X.XX` (chunk tokens through the pipeline ÷ the forward rate), `latency_10_pages_s X.X`.
bench-pipeline: provision build
	$(CARGO) build -p docpipe-model --example forward_bench
	source $(SERVICES_ENV) && scripts/bench-pipeline.sh

# Decode engine vs llama.cpp (llama-cpp-python) on the same GGUF, prompts and threads, one run
# (installs and compiles the reference once). Last lines: decode_speedup_vs_llamacpp_*.
bench-decode: libtorch decoder
	$(CARGO) build -p docpipe-model --example decode_bench
	scripts/bench-decode.sh
