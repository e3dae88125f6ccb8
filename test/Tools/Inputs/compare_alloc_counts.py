"""Compares the allocation counts of two runs of the same programs that
differ only in their number of steps (malloc_count.c's report files): a
device that allocates in its steady state allocates more in the longer run.
MPI's start-up allocates a varying number of times (+-20 seen), so a
device fails from one allocation every other step on average (60 over the
test's 120 more steps): an allocation per step or per micro-batch shows as
at least the step difference.
Prints one line per device (with oneDNN's own allocations a step, which
are reported, not failed), then 'steady: no allocations' or fails."""
import argparse
import sys


def counts(path):
    out = {}
    for line in open(path):
        name, n, lib = line.split()
        out.setdefault(name, []).append((int(n), int(lib)))
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("short")
    p.add_argument("long")
    p.add_argument("--steps", required=True, help="SHORT,LONG step counts")
    a = p.parse_args()
    s, l = counts(a.short), counts(a.long)
    short_steps, long_steps = map(int, a.steps.split(","))
    if not s or sorted(s) != sorted(l):
        sys.exit(f"error: the runs report different devices: {sorted(s)} vs {sorted(l)}")
    bad = False
    for name in sorted(s):
        cs, cl = sorted(s[name]), sorted(l[name])
        extra = [b[0] - a[0] for a, b in zip(cs, cl)]
        lib = max(b[1] - a[1] for a, b in zip(cs, cl))
        per_step = max(extra) / (long_steps - short_steps)
        print(f"{name}: {[c[0] for c in cs]} allocations in {short_steps} steps, "
              f"{[c[0] for c in cl]} in {long_steps}; oneDNN's: "
              f"{lib / (long_steps - short_steps):.2f} a step")
        if max(extra) * 2 >= long_steps - short_steps:
            print(f"error: {name} allocates in its steady state "
                  f"({per_step:.2f} allocations a step)")
            bad = True
    if bad:
        sys.exit(1)
    print("steady: no allocations")


if __name__ == "__main__":
    main()
