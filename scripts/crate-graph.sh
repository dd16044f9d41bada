#!/usr/bin/env bash
# The dependency graph between docpipe's crates (normal dependencies), as docs/architecture.md
# shows it: one line per crate, `crate -> the docpipe crates it uses`.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo metadata --format-version 1 --no-deps | python3 -c '
import json, sys
for p in sorted(json.load(sys.stdin)["packages"], key=lambda p: p["name"]):
    deps = sorted({d["name"][len("docpipe-"):] for d in p["dependencies"]
                   if d["name"].startswith("docpipe-") and d["kind"] is None})
    print("%-20s -> %s" % (p["name"], ", ".join(deps) or "(none)"))'
