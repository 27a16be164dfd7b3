#!/usr/bin/env python3
"""Regenerate testdata/conformance.txt from conformance.in with HTCondor's
ClassAd library: python3 testdata/gen_conformance.py < conformance.in."""
import json
import subprocess
import sys
import os

here = os.path.dirname(os.path.abspath(__file__))
lines = sys.stdin.read().split("\n")
exprs = [l for l in lines if l and not l.startswith("#") and not l.startswith("@")]
reqs = "".join(json.dumps({"expr": e, "my": None, "target": None}) + "\n" for e in exprs)
out = subprocess.run([sys.executable, os.path.join(here, "oracle.py")], input=reqs,
                     capture_output=True, text=True, check=True).stdout.split("\n")


def canon(r):
    t = r["t"]
    if t in ("int", "string", "abstime"):
        return t + ":" + r["v"]
    if t == "bool":
        return "bool:" + ("true" if r["v"] else "false")
    if t == "real":
        return "real:" + r["v"]
    if t == "list":
        return "list:[" + ", ".join(canon(x) for x in r["v"]) + "]"
    return t


i = 0
for l in lines:
    if not l or l.startswith("#") or l.startswith("@"):
        print(l)
        continue
    r = json.loads(out[i])
    i += 1
    print(l + "\t=> " + json.dumps(canon(r)))
