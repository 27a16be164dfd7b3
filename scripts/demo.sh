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

# pond's own record of the pool's processes, "NAME PID" a line: the demo
# acts on these and on nothing else that runs on this machine.
processes() { "$pondctl" output -raw processes; }
pid_of() { processes | awk -v n="$1" '$1 == n { print $2 }'; }
# ours PID: whether PID is an agent of this directory's pool, by its
# command line, which names its data directory under .pond here (a
# process that ended, or a PID reused by another process, is not).
datadir="$root/examples/local/.pond/local/nodes/"
ours() {
  case "$(ps -ww -o args= -p "$1" 2>/dev/null)" in
    *" -data-dir $datadir"*) return 0 ;;
    *) return 1 ;;
  esac
}
fail() { printf '\n\033[1;31mdemo failed: %s\033[0m\n' "$*" >&2; exit 1; }

step "kill -9 one agent, then pondctl plan shows the drift and its repair"
victim="$(pid_of campus-2)"
[ -n "$victim" ] && ours "$victim" || fail "pond records no running process for campus-2 (recorded: '${victim}')"
echo "campus-2 is process $victim"
kill -9 "$victim"
for _ in $(seq 1 50); do ours "$victim" || break; sleep 0.1; done
ours "$victim" && fail "campus-2 (process $victim) outlived kill -9"
rc=0
"$pondctl" plan -detailed-exitcode || rc=$?
[ "$rc" -eq 2 ] || fail "pondctl plan -detailed-exitcode exited $rc, not 2 (changes): it did not see that campus-2 was killed"
step "pondctl apply -auto-approve"
"$pondctl" apply -auto-approve
rc=0
"$pondctl" plan -detailed-exitcode >/dev/null || rc=$?
[ "$rc" -eq 0 ] || fail "pondctl plan -detailed-exitcode exited $rc after the apply, not 0: the apply did not repair the pool"
restarted="$(pid_of campus-2)"
[ -n "$restarted" ] && [ "$restarted" != "$victim" ] && ours "$restarted" ||
  fail "the apply did not start campus-2 again (recorded: '${restarted}')"
echo "campus-2 runs again, as process $restarted"

step "pondctl destroy -auto-approve"
pids="$(processes | awk '{ print $2 }')"
trap - EXIT
"$pondctl" destroy -auto-approve
left=0
for p in $pids; do
  if ours "$p"; then left=$((left + 1)); fi
done
echo
echo "agents still running: $left"
[ "$left" -eq 0 ] || fail "$left of the pool's agents still run after destroy"
