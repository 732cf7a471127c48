#!/usr/bin/env python3
"""The matrix of docs/FINDINGS.md from `schedlab suite --json`.

    schedlab suite --policies linux,linux-cas,linux-cas-wake,waker-streak,waker-streak+lb,home \\
        --topology genoa-96 --json > genoa-96.json
    scripts/findings-matrix.py genoa-96.json [--before OLD.json]

Prints one markdown table: the first policy's median, then each other's
median and ratio to it, `+`/`-` where the difference resolves (better,
worse). With --before (the same suite from an earlier build), a row whose
figures differ is marked `†`.
"""
import json
import sys


def num(v):
    """Four significant figures, as the suite's table prints them."""
    a = abs(v)
    if a < 1:
        return f"{v:.4g}"
    for digits, limit in ((3, 10), (2, 100), (1, 1000)):
        if a < limit:
            return f"{v:.{digits}f}"
    return f"{v:.0f}"


def cells(row, policies):
    base = policies[0]
    out = [num(row["policies"][base]["median"])]
    for p in policies[1:]:
        r = row["policies"][p]
        mark = ""
        if r.get("resolves"):
            mark = "+" if r.get("better") else "-"
        out.append(f"{num(r['median'])} {r['ratio']:.3f}{mark}")
    return out


def main():
    args = sys.argv[1:]
    before = None
    if "--before" in args:
        i = args.index("--before")
        before = json.load(open(args[i + 1]))
        del args[i : i + 2]
    now = json.load(open(args[0]))
    policies = now["policies"]
    old = {r["row"]: cells(r, policies) for r in before["rows"]} if before else {}
    print("| row | " + " | ".join(policies) + " |")
    print("|---" * (len(policies) + 1) + "|")
    for row in now["rows"]:
        c = cells(row, policies)
        name = f"{row['row']} ({row['unit']})"
        if before and old.get(row["row"]) != c:
            name += " †"
        print(f"| {name} | " + " | ".join(c) + " |")


main()
