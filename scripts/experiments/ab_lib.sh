# Shared by the pipeline A/B scripts here (sourced, not run): the services' environment, the
# first NDOCS contracts of ../shared/corpus/contracts by name in `files`, and `ab_run VARIANT
# [VAR=value...]`, which runs them through `docpipe run --timings` in a fresh bucket and prints the
# CPU's user/system/idle from /proc/stat over the run (model load included), then its stage table.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
source "${DOCPIPE_HOME:-$HOME/.cache/docpipe}/run/env.sh"
mapfile -t files < <(find ../shared/corpus/contracts -maxdepth 1 -name '*.pdf' | sort | head -n "$1")
cpu() { awk '/^cpu /{print $2+$3, $4, $5+$6, $2+$3+$4+$5+$6+$7+$8+$9}' /proc/stat; }
ab_run() {
  local s=$1; shift
  local tag u0 s0 i0 t0 u1 s1 i1 t1
  tag=ab$(date +%s)
  target/debug/docpipe put --bucket "$tag" "${files[@]}" >/dev/null
  read -r u0 s0 i0 t0 < <(cpu)
  env "$@" target/debug/docpipe run --bucket "$tag" --timings > "/tmp/ab-$tag-$s.txt" 2>&1
  read -r u1 s1 i1 t1 < <(cpu)
  echo "== $s $tag user $(( 100*(u1-u0)/(t1-t0) ))% sys $(( 100*(s1-s0)/(t1-t0) ))% idle $(( 100*(i1-i0)/(t1-t0) ))%"
  sed -n '/where the time went/,$p' "/tmp/ab-$tag-$s.txt"
}
