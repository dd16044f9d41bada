"""Poll /proc every 0.5 s until killed (SIGTERM/SIGINT), then print the CPU-seconds each
process (and each thread of docpipe) used since the start, grouped by command name, with its
share of the core-seconds this process's CPUs offered; Postgres's processes are also split by
role (its process title: client backends, autovacuum workers, checkpointer, WAL writer...);
first, the whole machine's user/nice/system/idle/iowait/steal shares from /proc/stat, which
also count what the poll missed. Children reaped by a polled parent count
in its "reaped children" (docpipe-extract and tesseract under docpipe); a process polled while
alive and then reaped counts in both (Postgres backends under the postmaster). A thread or
process that lives under 0.5 s between two polls may be missed.
  python3 scripts/experiments/cpu_by_process.py > cpu.txt & ...; kill %1
Used by scripts/bench-pipeline.sh around its run."""
import os, signal, sys, time, collections
HZ = os.sysconf('SC_CLK_TCK')
def stat(path):
    try:
        s = open(path).read()
    except OSError:
        return None
    comm = s[s.index('(')+1:s.rindex(')')]
    f = s[s.rindex(')')+2:].split()
    return comm, int(f[11]), int(f[12]), int(f[13]), int(f[14])  # utime stime cutime cstime
def pg_role(pid):
    """Postgres's process title, e.g. "postgres: autovacuum worker docpipe" -> autovacuum worker."""
    try:
        title = open(f'/proc/{pid}/cmdline', 'rb').read().replace(b'\0', b' ').decode(errors='replace')
    except OSError:
        return None
    if not title.startswith('postgres: '):
        return 'postmaster'
    words = title[len('postgres: '):].split()
    for role in ('autovacuum worker', 'autovacuum launcher', 'checkpointer', 'background writer',
                 'walwriter', 'logical replication launcher'):
        if ' '.join(words[:len(role.split())]) == role:
            return role
    return 'client backends'
def cpu_times():
    """The whole machine's jiffies from /proc/stat: user, nice, system, idle, iowait, irq, softirq, steal."""
    return [int(x) for x in open('/proc/stat').readline().split()[1:9]]
roles = {}
def snap():
    procs, threads = {}, {}
    for pid in os.listdir('/proc'):
        if not pid.isdigit(): continue
        st = stat(f'/proc/{pid}/stat')
        if not st: continue
        procs[int(pid)] = st
        if st[0] == 'postgres':
            r = pg_role(pid)
            if r: roles[int(pid)] = r
        if st[0] in ('docpipe',):
            try:
                for tid in os.listdir(f'/proc/{pid}/task'):
                    t = stat(f'/proc/{pid}/task/{tid}/stat')
                    if t: threads[(int(pid), int(tid))] = t
            except OSError: pass
    return procs, threads
cpu0 = cpu_times()
first_p, first_t = snap()
last_p, last_t = dict(first_p), dict(first_t)
stop = False
def handler(*_):
    global stop; stop = True
signal.signal(signal.SIGTERM, handler); signal.signal(signal.SIGINT, handler)
t0 = time.time()
while not stop:
    p, t = snap(); last_p.update(p); last_t.update(t); time.sleep(0.5)
wall = time.time() - t0
cpu1 = cpu_times()
by = collections.Counter(); child = collections.Counter()
for pid, (comm, u, s, cu, cs) in last_p.items():
    b = first_p.get(pid)
    if b and b[0] == comm: u, s, cu, cs = u - b[1], s - b[2], cu - b[3], cs - b[4]
    by[comm] += (u + s) / HZ; child[comm] += (cu + cs) / HZ
th = collections.Counter()
for k, (comm, u, s, cu, cs) in last_t.items():
    b = first_t.get(k)
    if b: u, s = u - b[1], s - b[2]
    th[comm] += (u + s) / HZ
avail = (len(os.sched_getaffinity(0)) or 1) * wall
print(f"wall {wall:.1f} s, core-seconds available {avail:.1f} ({avail / wall:.0f} cores)")
d = [b - a for a, b in zip(cpu0, cpu1)]
tot = sum(d) or 1
print("the machine's cores (/proc/stat): " + ", ".join(f"{n} {100 * v / tot:.1f} %" for n, v in zip(
    ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal"), d)))
for comm, v in by.most_common(25):
    if v + child[comm] >= 0.5:
        print(f"  {comm:<20} own {v:8.1f} ({100 * v / avail:4.1f} %)  reaped children {child[comm]:8.1f}")
pg = collections.Counter()
for pid, (comm, u, s, cu, cs) in last_p.items():
    if comm != 'postgres': continue
    b = first_p.get(pid)
    if b and b[0] == comm: u, s = u - b[1], s - b[2]
    pg[roles.get(pid, 'unknown')] += (u + s) / HZ
if pg:
    print("postgres by role:")
    for role, v in pg.most_common():
        if v >= 0.5: print(f"  {role:<20} {v:8.1f} ({100 * v / avail:4.1f} %)")
print("docpipe threads:")
for comm, v in th.most_common(20):
    if v >= 0.5: print(f"  {comm:<20} {v:8.1f} ({100 * v / avail:4.1f} %)")
