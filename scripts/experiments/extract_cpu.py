"""CPU-seconds (user + system) that text-layer extractor binaries take over a corpus, the binaries
alternating file by file, ROUNDS times: what an extractor change saves the pipeline's cores.
  python3 scripts/experiments/extract_cpu.py ROUNDS BIN... (corpus: BENCH_CORPUS, default
  ../shared/corpus/contracts)
Prints per round and binary the total and the slowest file."""
import os, resource, subprocess, sys
rounds, bins = int(sys.argv[1]), sys.argv[2:]
corpus = os.environ.get('BENCH_CORPUS', '../shared/corpus/contracts')
files = sorted(os.path.join(corpus, f) for f in os.listdir(corpus) if f.endswith('.pdf'))
def cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime
for r in range(1, rounds + 1):
    total = {b: 0.0 for b in bins}; worst = {b: (0.0, '') for b in bins}
    for f in files:
        for b in bins:
            with open(f, 'rb') as pdf:
                t0 = cpu()
                subprocess.run([b, 'extract-pdf'], stdin=pdf, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                t = cpu() - t0
            total[b] += t
            if t > worst[b][0]: worst[b] = (t, os.path.basename(f))
    for b in bins:
        print(f"round {r}  {b}  {len(files)} files  cpu {total[b]:.1f} s  slowest {worst[b][0]:.1f} s ({worst[b][1]})", flush=True)
