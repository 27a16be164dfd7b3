#!/usr/bin/env bash
# The CI job of examples/ci: stand the pool up, run a workload on the
# glideins, collect what it left, and tear everything down, whatever
# happened. Run from anywhere; it works in the directory it lives in.
#
# Environment:
#   POND_VAR_*      the configuration's variables (login_host, login_user,
#                   private_key_file, known_hosts_file, partition, work_dir, ...)
#   PONDCTL         the pondctl to run (default: pondctl on the PATH)
#   ARTIFACTS       the directory the artifacts go to (default: artifacts,
#                   next to this script)
#   SUBMIT_FILE     the workload's submit file, in this script's directory
#                   (default: jobs.sub)
#   JOBS_TIMEOUT    seconds the workload may take (default: 900)
#
# Exit status: 0 when every step passed and every job exited 0; else the
# status of the first step that failed (the teardown's when only it failed).
set -uo pipefail

# Paths given relative to where the script was started from.
abs() {
	case "$1" in
	/*) printf '%s\n' "$1" ;;
	*) printf '%s/%s\n' "$PWD" "$1" ;;
	esac
}
PONDCTL="${PONDCTL:-pondctl}"
case "$PONDCTL" in */*) PONDCTL="$(abs "$PONDCTL")" ;; esac
[ -n "${ARTIFACTS:-}" ] && ARTIFACTS="$(abs "$ARTIFACTS")"
cd "$(dirname "$0")" || exit 1
ARTIFACTS="${ARTIFACTS:-$PWD/artifacts}"
SUBMIT_FILE="${SUBMIT_FILE:-jobs.sub}"
JOBS_TIMEOUT="${JOBS_TIMEOUT:-900}"
export NO_COLOR=1

mkdir -p "$ARTIFACTS" out || exit 1

step() { printf '\n==> %s\n' "$*"; }
fail() {
	printf 'pipeline: %s\n' "$*" >&2
	exit 1
}

# Each step runs in a process group of its own (set -m), so that an
# interrupt reaches it once: from this script, which forwards the INT or
# TERM it gets (from a terminal, a CI runner, timeout(1)) to the step
# running, waits for the step to stop, and then exits 130 or 143.
set -m
child=
signalled=
forward() {
	signalled=$2
	if [ -n "$child" ]; then kill -s "$1" "$child" 2>/dev/null; fi
}
trap 'forward INT 130' INT
trap 'forward TERM 143' TERM

# run runs a command in the background and waits until it has ended, a
# signal's forwarding included; its status is the command's.
run() {
	"$@" &
	child=$!
	while :; do
		wait "$child"
		ran=$?
		kill -0 "$child" 2>/dev/null || break
	done
	child=
	return "$ran"
}

# pond runs a pondctl step, unless the script was interrupted.
pond() {
	if [ -n "$signalled" ]; then exit "$signalled"; fi
	run "$PONDCTL" "$@"
	ran=$?
	if [ -n "$signalled" ]; then exit "$signalled"; fi
	return "$ran"
}

# teardown runs on every exit, a failed step's included, and after an
# interrupt: it destroys whatever the state lists (an interrupt during the
# destroy is forwarded to it), and keeps the exit status of the step that
# failed (or its own, when only it failed).
teardown() {
	status=$?
	trap - EXIT
	step "destroy"
	run "$PONDCTL" destroy -auto-approve -input=false -no-color -json >"$ARTIFACTS/destroy.json"
	destroyed=$?
	if [ "$destroyed" -ne 0 ]; then
		printf 'pipeline: destroy failed (exit %d): see %s/destroy.json; the state keeps what is left\n' \
			"$destroyed" "$ARTIFACTS" >&2
		[ "$status" -eq 0 ] && status=$destroyed
	fi
	printf '\npipeline: exit %d\n' "$status"
	exit "$status"
}
trap teardown EXIT

step "init"
pond init -input=false -no-color || exit

step "test (plan runs against the login node)"
pond test -no-color -junit-xml="$ARTIFACTS/pondtest.xml" || {
	status=$?
	printf 'pipeline: pondctl test failed: see %s/pondtest.xml\n' "$ARTIFACTS" >&2
	exit "$status"
}

step "plan"
pond plan -input=false -no-color -json -detailed-exitcode -out=tfplan >"$ARTIFACTS/plan.json"
planned=$?
case "$planned" in
0) echo "no changes: the pool is up already" ;;
2)
	pond show -no-color tfplan | tee "$ARTIFACTS/plan.txt"
	pond show -json tfplan >"$ARTIFACTS/plan-document.json" || exit
	step "apply"
	pond apply -input=false -no-color -json tfplan >"$ARTIFACTS/apply.json" || {
		status=$?
		printf 'pipeline: apply failed: see %s/apply.json\n' "$ARTIFACTS" >&2
		exit "$status"
	}
	;;
*)
	printf 'pipeline: plan failed (exit %d): see %s/plan.json\n' "$planned" "$ARTIFACTS" >&2
	exit 1
	;;
esac
pond output -no-color
pond output -json >"$ARTIFACTS/outputs.json" || exit
cm="$("$PONDCTL" output -raw central_manager)" || exit

step "submit $SUBMIT_FILE"
# A token for this user, to submit as, that expires with the job.
POND_TOKEN="$("$PONDCTL" token create -subject "$(id -un)" -scope WRITE -lifetime 2h)" || exit
export POND_TOKEN
rm -f jobs.log
submitted="$("$PONDCTL" condor submit -pool "$cm" -terse "$SUBMIT_FILE")" || exit
echo "$submitted"
cluster="${submitted%%.*}"
case "$cluster" in
'' | *[!0-9]*) fail "condor submit printed no job ID: $submitted" ;;
esac
first="${submitted%% - *}"
last="${submitted##* - }"
jobs=$((${last#*.} - ${first#*.} + 1))

step "wait for the $jobs jobs of cluster $cluster (at most ${JOBS_TIMEOUT}s)"
pond condor wait -wait "$JOBS_TIMEOUT" jobs.log "$cluster"
waited=$?

step "collect"
cp jobs.log "$ARTIFACTS/" 2>/dev/null
cp -r out "$ARTIFACTS/" 2>/dev/null
pond condor history -pool "$cm" -constraint "ClusterId == $cluster" -json >"$ARTIFACTS/history.json"
pond condor q -pool "$cm" -constraint "ClusterId == $cluster" -json >"$ARTIFACTS/queue.json"
pond show -json >"$ARTIFACTS/state.json"
if [ "$waited" -ne 0 ]; then
	pond condor q -pool "$cm" -constraint "ClusterId == $cluster"
	fail "the jobs of cluster $cluster did not all finish in ${JOBS_TIMEOUT}s: see $ARTIFACTS/queue.json"
fi
# -af takes every argument after it: the cluster goes in the constraint.
ok="$("$PONDCTL" condor history -pool "$cm" -constraint "ClusterId == $cluster && JobStatus == 4 && ExitBySignal =!= true && ExitCode == 0" -af ProcId)" || exit
passed="$(printf '%s' "$ok" | grep -c .)"
echo "$passed of $jobs jobs exited 0"
if [ "$passed" -ne "$jobs" ]; then
	pond condor history -pool "$cm" -constraint "ClusterId == $cluster" -af ProcId JobStatus ExitCode ExitBySignal
	fail "$((jobs - passed)) of the $jobs jobs failed: see $ARTIFACTS/history.json and $ARTIFACTS/out"
fi
