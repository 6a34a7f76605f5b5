#!/usr/bin/env python3
"""Reads a kernel timeline of libtrace.so (scripts/trace/trace.c) and says
where the repeated steps of a run (a decode loop's graph replays) spend
their GPU time.

    python3 steps.py TRACE [--gap 5] [--steps 30] [--rows 40]

The kernels split into groups where the GPU idles more than --gap µs; the
steps are the last --steps groups of the commonest size among the last 60.
A kernel's share of a step is its marginal time: how far its end passes
the latest end before it. Kernels launched early (programmatic dependent
launch) start while the one before runs, so their own durations overlap
and add up to more than the step; the marginal times add up to the step.
"""
import argparse
import collections
import statistics


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--gap", type=float, default=5.0, help="µs of idle GPU between groups")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--rows", type=int, default=40, help="kernels of one step to list")
    a = ap.parse_args()
    kernels = []
    for line in open(a.trace):
        f = line.split(None, 4)
        if len(f) == 5 and f[4].strip() != "memcpy":
            kernels.append((int(f[0]), int(f[1]), f[4].strip()))
    kernels.sort()
    groups, cur, last = [], [], None
    for k in kernels:
        if last is not None and k[0] - last > a.gap * 1e3:
            groups.append(cur)
            cur = []
        cur.append(k)
        last = max(last or 0, k[1])
    if cur:
        groups.append(cur)
    if not groups:
        raise SystemExit("no kernels in " + a.trace)
    size = collections.Counter(len(g) for g in groups[-60:]).most_common(1)[0][0]
    steps = [g for g in groups if len(g) == size][-a.steps:]
    print(f"{len(kernels)} kernels in {len(groups)} groups; {len(steps)} steps of {size} kernels")
    spans, gaps = [], []
    share = collections.defaultdict(list)  # name -> marginal µs a step
    rows = collections.defaultdict(list)  # position -> (marginal, duration, name)
    for i, g in enumerate(steps):
        t0, end = g[0][0], g[0][0]
        by = collections.defaultdict(float)
        for j, (s, e, name) in enumerate(g):
            m = max(e - end, 0) / 1e3
            by[name] += m
            rows[j].append((m, (e - s) / 1e3, name))
            end = max(end, e)
        spans.append((end - t0) / 1e3)
        for name, m in by.items():
            share[name].append(m)
        if i:
            gaps.append((g[0][0] - max(e for _, e, _ in steps[i - 1])) / 1e3)
    print(f"a step's GPU time: median {statistics.median(spans):.1f} µs (min {min(spans):.1f});"
          f" idle between steps: median {statistics.median(gaps) if gaps else 0:.1f} µs")
    count = collections.Counter(name for _, _, name in steps[-1])
    print(f"{'kernel':<52} {'µs a step':>10} {'launches':>9} {'µs each':>8}")
    for name, v in sorted(share.items(), key=lambda x: -statistics.median(x[1])):
        m = statistics.median(v)
        print(f"{name[:52]:<52} {m:10.1f} {count[name]:9d} {m / count[name]:8.2f}")
    print(f"one step, kernel by kernel (medians over the steps): {'marginal':>8} {'duration':>8}")
    for j in range(min(size, a.rows)):
        r = rows[j]
        print(f"{j:4d} {r[0][2][:52]:<52} {statistics.median(x[0] for x in r):8.2f} {statistics.median(x[1] for x in r):8.2f}")


if __name__ == "__main__":
    main()
