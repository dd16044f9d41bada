#!/usr/bin/env bash
# A/B of glibc's arenas inside `docpipe run` (issue 24's idle cores): A = the default (one arena,
# DOCPIPE_CPU_KEEP_HEAP), B = up to 8 arenas with the same no-mmap/no-trim settings through
# GLIBC_TUNABLES. Usage: scripts/experiments/arena_ab.sh NDOCS A B B A   (the first NDOCS PDFs of
# ../shared/corpus/contracts by name, each run in a fresh bucket; what each run prints: ab_lib.sh)
source "$(dirname "$0")/ab_lib.sh" "$1"
shift
for s in "$@"; do
  if [ "$s" = B ]; then
    ab_run B DOCPIPE_CPU_KEEP_HEAP=0 GLIBC_TUNABLES=glibc.malloc.arena_max=8:glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=4294967295:glibc.malloc.mmap_threshold=4294967295
  else ab_run A; fi
done
