#!/usr/bin/env python3
"""Print what HTCondor's classad_eval prints for many expressions at once.

Reads JSON lines {"expr": str, "my": str|null, "target": str|null} on
stdin and writes one JSON line per input, {"out": str}: the text
classad_eval -quiet prints for the expression evaluated with the ad "my"
as its context (an empty ad when null) and "target" as TARGET, that is
repr(ExprTree(expr).simplify(my, target)), with htcondor2 loaded as
classad_eval has HTCondor's functions; "PARSE_ERROR" when the
expression does not parse and "EXCEPTION: ..." when the bindings raise.
Used by the Go test compat_test.go, which batches its cases through one
process of this script.
"""
import json
import sys

import classad2 as classad
import htcondor2  # noqa: F401  (registers HTCondor's own functions: split, stringList*, ...)


def main():
    # Every expression gets ads of its own, as classad_eval builds them
    # afresh: evaluating in HTCondor's library can leave state in an ad
    # (a match sets its parent scope) that changes later results.
    def ad(src):
        if src is None:
            return None
        return classad.ClassAd(src)

    out = sys.stdout
    for line in sys.stdin:
        req = json.loads(line)
        try:
            e = classad.ExprTree(req["expr"])
        except Exception:
            res = "PARSE_ERROR"
        else:
            try:
                my = ad(req.get("my")) or classad.ClassAd()
                res = repr(e.simplify(my, ad(req.get("target"))))
            except Exception as ex:
                res = "EXCEPTION: " + str(ex)
        out.write(json.dumps({"out": res}) + "\n")
    out.flush()


if __name__ == "__main__":
    main()
