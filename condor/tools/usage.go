package tools

// usage maps each tool's name to its synopsis, printed for -help.
var usage = map[string]string{
	"submit": `Usage: pondctl condor submit [-pool ADDR] [NAME=VALUE ...] SUBMIT-FILE
  Queues the jobs a submit description file describes.`,
	"q": `Usage: pondctl condor q [-pool ADDR] [-constraint EXPR] [-hold | -run | -nobatch] [-af ATTR ...] [-l] [-json] [CLUSTER[.PROC] | OWNER ...]
  Lists the jobs in the queue.`,
	"status": `Usage: pondctl condor status [-pool ADDR] [-schedd | -submitters | -negotiator | -master | -any] [-constraint EXPR] [-af ATTR ...] [-l] [-json] [NAME ...]
  Lists the ads the pool's collector holds (slots by default).`,
	"rm": `Usage: pondctl condor rm [-pool ADDR] [-constraint EXPR | -all | CLUSTER[.PROC] | OWNER ...]
  Removes jobs.`,
	"hold": `Usage: pondctl condor hold [-pool ADDR] [-reason TEXT] [-constraint EXPR | -all | CLUSTER[.PROC] | OWNER ...]
  Holds jobs.`,
	"release": `Usage: pondctl condor release [-pool ADDR] [-constraint EXPR | -all | CLUSTER[.PROC] | OWNER ...]
  Releases held jobs.`,
	"history": `Usage: pondctl condor history [-pool ADDR] [-constraint EXPR] [-limit N | -match N] [-af ATTR ...] [-l] [-json] [CLUSTER[.PROC] | OWNER ...]
  Lists jobs that have left the queue, newest first.`,
	"config_val": `Usage: pondctl condor config_val [-verbose] [-raw | -expand] [-dump | -set "NAME = VALUE" | -unset NAME | NAME ...]
  Prints configuration values, or changes them.`,
	"reconfig": `Usage: pondctl condor reconfig [-pool ADDR]
  Makes the node's master re-read its configuration and apply it.`,
	"quarantine": `Usage: pondctl condor quarantine [-pool ADDR] [-json] [-lift MACHINE ... | MACHINE ...]
  Lists the machines quarantined because they could not start jobs again and again, with the reasons; -lift ends their quarantine.`,
	"client-config": `Usage: pondctl condor client-config [-pool ADDR]
  Prints a configuration for HTCondor's own clients (the htcondor Python bindings and tool) that points them at the pool: use it as CONDOR_CONFIG.`,
}

// Usage returns the synopsis of the tool called name, or "" if there is no
// such tool.
func Usage(name string) string { return usage[name] }
