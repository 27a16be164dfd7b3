"""Job ads of submit files as HTCondor 24's condor_submit makes them.

The oracle of TestSubmitCompatibilityWithHTCondor (condor/submit/compat_test.go).
HTCondor 24's Python bindings turn a submit description into job ads
without a schedd (Submit.jobs); HTCondor 25's no longer can, so this runs
with PYTHONPATH naming a directory holding htcondor>=24,<25.

stdin: a JSON list of {"file": path, "dir": submit directory}.
stdout: {"environ": the environment getenv and $ENV() see, "files": a list,
per file either {"error": message} or {"ads": [{attribute: expression
text}, ...]}}.
"""
import json
import os
import sys
import warnings

warnings.simplefilter("ignore")
import htcondor  # noqa: E402

if not htcondor.version().startswith("$CondorVersion: 24."):
    sys.exit("jobads.py needs HTCondor 24's bindings, not " + htcondor.version())

out = []
for req in json.load(sys.stdin):
    os.chdir(req["dir"])
    with open(req["file"]) as f:
        text = f.read()
    try:
        s = htcondor.Submit(text)
        ads = [{k: str(ad.lookup(k)) for k in ad.keys()}
               for ad in s.jobs(clusterid=1, qdate=int(req.get("qdate", 1000)))]
        out.append({"ads": ads})
    except Exception as e:  # HTCondor refuses the file
        out.append({"error": str(e) or type(e).__name__})
print(json.dumps({"environ": dict(os.environ), "files": out}))
