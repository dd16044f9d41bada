#!/usr/bin/env bash
# A/B of glibc's arenas inside `docpipe run` (issue 24's idle cores): A = the default (one arena,
# DOCPIPE_CPU_KEEP_HEAP), B = up to 8 arenas with the same no-mmap/no-trim settings through
# GLIBC_TUNABLES. Usage: scripts/experiments/arena_ab.sh NDOCS A B B A   (the first NDOCS PDFs of
# ../shared/corpus/contracts by name, each run in a fresh bucket; the CPU's user/system/idle from
# /proc/stat over each run, model load included, then the run's stage table)
set -euo pipefail
cd "$(dirname "$0")/../.."
source "${DOCPIPE_HOME:-$HOME/.cache/docpipe}/run/env.sh"
n=$1; shift
mapfile -t files < <(find ../shared/corpus/contracts -maxdepth 1 -name '*.pdf' | sort | head -n "$n")
cpu() { awk '/^cpu /{print $2+$3, $4, $5+$6, $2+$3+$4+$5+$6+$7+$8+$9}' /proc/stat; }
for s in "$@"; do
  tag=ab$(date +%s)
  target/debug/docpipe put --bucket "$tag" "${files[@]}" >/dev/null
  if [ "$s" = B ]; then
    envs=(DOCPIPE_CPU_KEEP_HEAP=0 GLIBC_TUNABLES=glibc.malloc.arena_max=8:glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=4294967295:glibc.malloc.mmap_threshold=4294967295)
  else envs=(); fi
  read -r u0 s0 i0 t0 < <(cpu)
  env "${envs[@]}" target/debug/docpipe run --bucket "$tag" --timings > /tmp/ab-$tag-$s.txt 2>&1
  read -r u1 s1 i1 t1 < <(cpu)
  echo "== $s $tag user $(( 100*(u1-u0)/(t1-t0) ))% sys $(( 100*(s1-s0)/(t1-t0) ))% idle $(( 100*(i1-i0)/(t1-t0) ))%"
  sed -n '/where the time went/,$p' /tmp/ab-$tag-$s.txt
done
