#!/usr/bin/env python3
"""Evaluate ClassAd expressions with HTCondor's Python bindings.

Reads JSON lines {"expr": str, "my": str|null, "target": str|null} on stdin
and writes one JSON line per input: {"t": type, "v": value, "unparse": str}
or {"t": "parse_error"}. Used by the Go differential test.
"""
import datetime
import json
import sys

try:
    import classad2 as classad
except ImportError:
    import classad  # older bindings


def enc(v, my=None, target=None):
    if isinstance(v, classad.Value):
        return {"t": "error" if v == classad.Value.Error else "undefined"}
    if isinstance(v, bool):
        return {"t": "bool", "v": v}
    if isinstance(v, int):
        return {"t": "int", "v": str(v)}
    if isinstance(v, float):
        return {"t": "real", "v": repr(v)}
    if isinstance(v, str):
        return {"t": "string", "v": v}
    if isinstance(v, list):
        return {"t": "list", "v": [enc(x, my, target) for x in v]}
    if isinstance(v, classad.ClassAd):
        return {"t": "ad"}
    if isinstance(v, datetime.datetime):
        return {"t": "abstime", "v": str(int(v.timestamp()))}
    if isinstance(v, classad.ExprTree):
        return enc(v.eval(my, target) if my is not None else v.eval(), my, target)
    return {"t": "unknown", "v": repr(v)}


cache = {}


def ad(src):
    if src is None:
        return None
    if src not in cache:
        cache[src] = classad.ClassAd(src)
    return cache[src]


def main():
    out = sys.stdout
    for line in sys.stdin:
        req = json.loads(line)
        try:
            holder = classad.ClassAd("[__x = " + req["expr"] + "]")
            e = holder.lookup("__x")
            unparse = repr(holder)
        except Exception:
            out.write(json.dumps({"t": "parse_error"}) + "\n")
            continue
        try:
            my = ad(req.get("my"))
            target = ad(req.get("target"))
            if my is not None:
                v = classad.ExprTree(req["expr"]).eval(my, target)
            else:
                v = classad.ExprTree(req["expr"]).eval()
            r = enc(v, my, target)
        except Exception as ex:  # the bindings raise on some values
            r = {"t": "exception", "v": str(ex)}
        r["unparse"] = unparse
        out.write(json.dumps(r) + "\n")
    out.flush()


if __name__ == "__main__":
    main()
