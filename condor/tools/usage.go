package tools

// usage maps each tool's name to its synopsis, printed for -help.
var usage = map[string]string{
	"submit": `Usage: pondctl condor submit [-pool ADDR] [-name SCHEDD] [-terse] [-batch-name NAME] [-append LINE ...] [NAME=VALUE ...] [SUBMIT-FILE | -] [-queue ARGS...]
  Queues the jobs a submit description file describes (read from standard input without one, or with -).`,
	"q": `Usage: pondctl condor q [-pool ADDR] [-name SCHEDD] [-constraint EXPR] [-allusers] [-totals | -hold | -run | -nobatch | -batch] [-limit N]
         [-af[:jlhVrng,t] EXPR ... | -format FMT EXPR ... | -l | -json | -analyze | -better-analyze] [-attributes A,B] [CLUSTER[.PROC] | OWNER ...]
  Lists the jobs in the queue. -better-analyze (or the shorter -analyze) tells why jobs (the idle ones by default, at most 50
  without -limit) do not run: the slots their Requirements match and which condition rejects the most, the schedd's
  MAX_JOBS_RUNNING and JOB_START_COUNT, full concurrency limits, and the owner's fair share; with -json as JSON.`,
	"status": `Usage: pondctl condor status [-pool ADDR] [-schedd | -submitters | -negotiator | -master | -any] [-constraint EXPR] [-totals]
         [-af[:jlhVrng,t] EXPR ... | -format FMT EXPR ... | -l | -json] [-attributes A,B] [NAME ...]
       pondctl condor status -history [-pool ADDR] [-since DURATION] [-constraint EXPR] [-json] [MACHINE]
       pondctl condor status -history (-snapshots [-since DURATION] | -at TIME) [-pool ADDR] [-constraint EXPR] [-l | -json | -af EXPR ...] [MACHINE]
  Lists the ads the pool's collector holds (slots by default). With -history: the central manager's history of the last DURATION (default 24h), as pool-history shows it; -constraint selects rows by their ads (State, Activity, RemoteUser, JobId, EnteredCurrentState of a slot's; Knob, OldValue, NewValue, Who, ChangeTime of a configuration change's; Name and Machine of both).`,
	"rm": `Usage: pondctl condor rm [-pool ADDR] [-constraint EXPR | -all | CLUSTER[.PROC] | OWNER ...]
  Removes jobs.`,
	"hold": `Usage: pondctl condor hold [-pool ADDR] [-reason TEXT] [-constraint EXPR | -all | CLUSTER[.PROC] | OWNER ...]
  Holds jobs.`,
	"release": `Usage: pondctl condor release [-pool ADDR] [-constraint EXPR | -all | CLUSTER[.PROC] | OWNER ...]
  Releases held jobs.`,
	"history": `Usage: pondctl condor history [-pool ADDR] [-constraint EXPR] [-limit N | -match N] [-af[:OPTS] EXPR ... | -format FMT EXPR ... | -l | -json] [CLUSTER[.PROC] | OWNER ...]
  Lists jobs that have left the queue, newest first.`,
	"wait": `Usage: pondctl condor wait [-wait SECONDS] [-num N] [-status] [-echo] LOG-FILE [CLUSTER[.PROC]]
  Waits until the jobs of a job event log (or those of one cluster or job) have terminated or been aborted: exit 0, or 1 when -wait runs out.`,
	"tail": `Usage: pondctl condor tail [-pool ADDR] [-name SCHEDD] [-f] [-stderr] [-maxbytes N] CLUSTER.PROC
  Prints the end of a running job's output (-stderr: its error), read from the machine that runs it; -f follows it until the job stops running.`,
	"config_val": `Usage: pondctl condor config_val [-verbose] [-raw | -expand] [-dump | -set "NAME = VALUE" | -unset NAME | NAME ...]
  Prints configuration values, or changes them.`,
	"pool-history": `Usage: pondctl condor pool-history [-pool ADDR] [-since DURATION] [-machine NAME] [-constraint EXPR] [-json]
       pondctl condor pool-history [-pool ADDR] (-snapshots [-since DURATION] | -at TIME) [-machine NAME] [-constraint EXPR] [-l | -json | -af EXPR ...]
  Shows the central manager's history of the last DURATION (default 24h): each slot's states over time, the slot time each user's jobs held, and the configuration changes of the pool's nodes; -constraint EXPR keeps the rows whose ad it is true of (see status -history). -snapshots shows the machine ads' snapshots of the period instead, -at TIME the pool as it was at TIME (RFC 3339, "2006-01-02 15:04", Unix seconds, or a duration ago), -constraint then selecting by the snapshot's ad. pond's own command; condor status -history is the same.`,
	"config-history": `Usage: pondctl condor config-history [-pool ADDR] [-node NAME] [-since DURATION] [-constraint EXPR] [-applies] [-json]
  Shows the configuration changes of the pool's nodes over the last DURATION (default 24h), as each node's master advertised them to the central manager (secrets redacted): each knob added, removed or changed, its old and new value, when and by whom; then the pondctl applies and destroys that changed the pool (time, serial, command, user, token subject as the central manager authenticated it, and each address's action and changed attribute names). -applies shows the applies alone (-json: their records).`,
	"reconfig": `Usage: pondctl condor reconfig [-pool ADDR]
  Makes the node's master re-read its configuration and apply it.`,
	"drain": `Usage: pondctl condor drain [-pool ADDR] [-graceful | -quick | -fast] [-reason TEXT] [-json] MACHINE
       pondctl condor drain [-pool ADDR] -cancel [-request-id ID] [-json] MACHINE
  Drains a machine, as condor_drain: it takes no new job until the drain is cancelled, and the jobs running on it are evicted and go back to their schedds' queues to run elsewhere. -graceful (the default) lets them run out their retirement time (MaxJobRetirementTime) first, then vacates them; -quick vacates them at once, with their vacate time (MachineMaxVacateTime); -fast kills them at once. -cancel ends the drain (the one -request-id names): jobs still retiring run on. Needs ADMINISTRATOR.`,
	"quarantine": `Usage: pondctl condor quarantine [-pool ADDR] [-json] [-lift MACHINE ... | MACHINE ...]
  Lists the machines quarantined because they could not start jobs again and again, with the reasons; -lift ends their quarantine.`,
}

// Usage returns the synopsis of the tool called name, or "" if there is no
// such tool.
func Usage(name string) string { return usage[name] }
