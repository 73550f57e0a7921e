#!/usr/bin/env python3
"""Per-function instructions per request from callgrind files, and the
difference between two builds.

    bench/cg_diff.py N RUN_N RUN_2N [OTHER_N OTHER_2N] [--top K] [--inclusive]

RUN_N and RUN_2N are callgrind output files of one server that handled N
and 2N requests (`CG_OUT=DIR bench/allocs.sh proxy` writes
DIR/proxy.N.out and DIR/proxy.2N.out). Each function's cost per request is
(cost in RUN_2N - cost in RUN_N) / N: start-up and shutdown cancel out.
With a second pair (another build, the same N), the table shows both and
the difference, largest first. Self cost by default (`--inclusive`:
inclusive cost, which counts a function's callees too).
"""

import argparse
import re
import subprocess
import sys


def per_function(path, inclusive):
    args = ["callgrind_annotate", "--threshold=100", path]
    if inclusive:
        args.insert(1, "--inclusive=yes")
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    got = {}
    line_re = re.compile(r"^\s*([\d,]+)\s+(?:\([^)]*\)\s+)?(\S.*)$")
    for line in out.splitlines():
        m = line_re.match(line)
        if not m or ":" not in m.group(2):
            continue
        name = m.group(2).strip()
        if name.startswith(("=>", "<", "*")):
            continue  # call-tree lines, not a function's own line
        # "file:function [object]": the object is the same in both runs.
        name = re.sub(r"\s+\[[^\]]*\]$", "", name)
        # Two builds from two checkouts: names relative to the repository.
        name = re.sub(r"^\S*?/(crates/)", r"\1", name)
        got[name] = got.get(name, 0) + int(m.group(1).replace(",", ""))
    return got


def per_request(n, a, b, inclusive):
    fa, fb = per_function(a, inclusive), per_function(b, inclusive)
    return {k: (fb.get(k, 0) - fa.get(k, 0)) / n for k in set(fa) | set(fb)}


def short(name, width=90):
    return name if len(name) <= width else "..." + name[-(width - 3):]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("n", type=int)
    ap.add_argument("files", nargs="+")
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--inclusive", action="store_true")
    o = ap.parse_args()
    if len(o.files) not in (2, 4):
        sys.exit("cg_diff.py: give two files (one build) or four (two builds)")
    one = per_request(o.n, o.files[0], o.files[1], o.inclusive)
    if len(o.files) == 2:
        rows = sorted(one.items(), key=lambda kv: -abs(kv[1]))[: o.top]
        print(f"{'instr/req':>10}  function")
        for k, v in rows:
            print(f"{v:10.1f}  {short(k)}")
        if not o.inclusive:
            print(f"{sum(one.values()):10.1f}  (sum of the functions listed by callgrind_annotate)")
        return
    two = per_request(o.n, o.files[2], o.files[3], o.inclusive)
    keys = set(one) | set(two)
    rows = sorted(keys, key=lambda k: -abs(two.get(k, 0) - one.get(k, 0)))[: o.top]
    print(f"{'first':>10} {'second':>10} {'diff':>10}  function")
    for k in rows:
        a, b = one.get(k, 0), two.get(k, 0)
        print(f"{a:10.1f} {b:10.1f} {b - a:10.1f}  {short(k)}")
    if not o.inclusive:
        sa, sb = sum(one.values()), sum(two.values())
        print(f"{sa:10.1f} {sb:10.1f} {sb - sa:10.1f}  (sums)")


if __name__ == "__main__":
    main()
