#!/usr/bin/env bash
# make demo: apply examples/local, show the running pool, destroy it.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
pondctl="$root/bin/pondctl"
cd "$root/examples/local"

cleanup() { "$pondctl" destroy -auto-approve -no-color >/dev/null 2>&1 || true; }
trap cleanup EXIT

step() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }

step "pondctl init"
"$pondctl" init
step "pondctl plan"
"$pondctl" plan -out demo.plan
step "pondctl apply demo.plan"
"$pondctl" apply demo.plan
rm -f demo.plan

sea="$("$pondctl" output -raw sea)"
step "pondctl sea members -sea $sea"
"$pondctl" sea members -sea "$sea"
cm="$("$pondctl" output -raw central_manager)"
step "pondctl condor status -pool $cm"
"$pondctl" condor status -pool "$cm"

# The jobs are submitted from a directory of their own, as a user would:
# with a token of the user's own (its subject owns the jobs) and the sea's
# CA, which proves the pool's nodes before the token is sent (in the
# working directory of the pool the tools find both by themselves).
user="$(id -un)"
step "pondctl token create -subject $user -scope WRITE -lifetime 1h"
POND_TOKEN="$("$pondctl" token create -subject "$user" -scope WRITE -lifetime 1h)"
export POND_TOKEN
export POND_TLS_CA="$root/examples/local/.pond/auth/ca.pem"
jobs="$(mktemp -d)"
cat >"$jobs/hello.sub" <<'SUB'
executable = /bin/echo
arguments  = "hello from job $(Process)"
output     = hello.$(Process).out
log        = hello.log
queue 4
SUB
step "pondctl condor submit -pool $cm hello.sub"
(cd "$jobs" && "$pondctl" condor submit -pool "$cm" hello.sub)
for _ in $(seq 1 60); do
  [ "$(ls "$jobs"/hello.*.out 2>/dev/null | wc -l)" -eq 4 ] && break
  sleep 0.5
done
step "the jobs' output"
cat "$jobs"/hello.*.out
step "pondctl condor history -pool $cm"
"$pondctl" condor history -pool "$cm"
rm -rf "$jobs"
unset POND_TOKEN POND_TLS_CA
step "pondctl state list"
"$pondctl" state list

step "kill -9 one agent, then pondctl plan shows the drift and its repair"
pid="$(pgrep -f -- "-name campus-2 " | head -n1)"
kill -9 "$pid"
sleep 1
"$pondctl" plan -detailed-exitcode || [ $? -eq 2 ]
step "pondctl apply -auto-approve"
"$pondctl" apply -auto-approve

step "pondctl destroy -auto-approve"
trap - EXIT
"$pondctl" destroy -auto-approve
left="$(pgrep -fc -- "pondctl agent .*examples/local" || true)"
echo
echo "agents still running: ${left:-0}"
