"""Take part of one core in short bursts, as the pipeline's other processes do: spin for BUSY
milliseconds, sleep for SLEEP, until killed. `python3 busy.py 5 45` takes a tenth of a core.
Used beside forward_bench in docs/benchmarks.md."""
import sys
import time

busy, sleep = float(sys.argv[1]) / 1000, float(sys.argv[2]) / 1000
while True:
    t = time.perf_counter()
    while time.perf_counter() - t < busy:
        pass
    time.sleep(sleep)
