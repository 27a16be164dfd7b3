package slurm

import (
	"strconv"
	"strings"
	"time"

	"github.com/pond-htc/pond/overlay/glidein"
	"github.com/pond-htc/pond/overlay/glidein/batch"
)

// sep separates the fields of squeue's and sacct's output: a character no
// job name or comment holds in practice.
const sep = "\x1f"

// squeueFormat asks squeue for the fields parseSqueue reads.
const squeueFormat = "%i" + sep + "%j" + sep + "%T" + sep + "%r" + sep + "%N" + sep + "%V" + sep + "%S" + sep + "%e" + sep + "%k"

// sacctFields asks sacct for the fields parseSacct reads.
const sacctFields = "JobIDRaw,JobName,State,Reason,NodeList,Submit,Start,End,ExitCode,Comment"

// job is one Slurm job as squeue or sacct reports it.
type job struct {
	id      string
	name    string
	state   string // PENDING, RUNNING, CANCELLED, ...
	by      string // sacct's "CANCELLED by UID"
	reason  string // Slurm's reason: Resources, NonZeroExitCode, ...
	nodes   string
	exit    string // sacct's EXITCODE:SIGNAL
	comment string
	detail  string // why the glidein failed, from its status file
	submit  time.Time
	start   time.Time
	end     time.Time
}

// parseSqueue reads squeue's output in squeueFormat. Lines it cannot read
// are skipped.
func parseSqueue(out string) []job {
	var jobs []job
	for _, line := range strings.Split(out, "\n") {
		f := strings.Split(line, sep)
		if len(f) != 9 || !isJobID(f[0]) {
			continue
		}
		j := job{id: f[0], name: f[1], reason: f[3], nodes: f[4], comment: f[8],
			submit: parseTime(f[5]), start: parseTime(f[6]), end: parseTime(f[7])}
		j.state, j.by = parseState(f[2])
		jobs = append(jobs, j)
	}
	return jobs
}

// parseSacct reads sacct's output (-P -n with sep) of sacctFields. Lines
// it cannot read are skipped.
func parseSacct(out string) []job {
	var jobs []job
	for _, line := range strings.Split(out, "\n") {
		f := strings.Split(line, sep)
		if len(f) != 10 || !isJobID(f[0]) {
			continue
		}
		j := job{id: f[0], name: f[1], reason: f[3], nodes: f[4], exit: f[8], comment: f[9],
			submit: parseTime(f[5]), start: parseTime(f[6]), end: parseTime(f[7])}
		j.state, j.by = parseState(f[2])
		jobs = append(jobs, j)
	}
	return jobs
}

// exitFields asks sacct for the fields parseSacctExits reads.
const exitFields = "JobIDRaw,State,ExitCode,Reason"

// parseSacctExits reads the output of sacct -j IDS (-P -n with sep) of
// exitFields: how each job ended, by its id. A line it cannot read, a
// job step (ID.batch), or an exit code that is not EXITCODE:SIGNAL is
// skipped.
func parseSacctExits(out string) map[string]job {
	jobs := map[string]job{}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Split(strings.TrimSuffix(line, "\r"), sep)
		if len(f) != 4 || !isJobID(f[0]) || !isExitCode(f[2]) {
			continue
		}
		j := job{id: f[0], exit: f[2], reason: f[3]}
		j.state, j.by = parseState(f[1])
		jobs[j.id] = j
	}
	return jobs
}

// isExitCode reports whether s is sacct's EXITCODE:SIGNAL, both numbers.
func isExitCode(s string) bool {
	code, sig, ok := strings.Cut(s, ":")
	if !ok {
		return false
	}
	_, err1 := strconv.ParseUint(code, 10, 8)
	_, err2 := strconv.ParseUint(sig, 10, 8)
	return err1 == nil && err2 == nil
}

func isJobID(s string) bool {
	_, err := strconv.ParseUint(s, 10, 64)
	return err == nil
}

// parseState splits sacct's "CANCELLED by 1000" and squeue's plain state.
func parseState(s string) (state, by string) {
	state, by, _ = strings.Cut(strings.TrimSpace(s), " by ")
	return strings.TrimSuffix(state, "+"), by
}

// parseTime reads Slurm's standard time format, in local time; "N/A",
// "Unknown", "None" and the like are the zero time.
func parseTime(s string) time.Time {
	t, err := time.ParseInLocation("2006-01-02T15:04:05", strings.TrimSpace(s), time.Local)
	if err != nil {
		return time.Time{}
	}
	return t
}

// stateOf maps a Slurm job state to a glidein's.
func stateOf(slurmState string) (glidein.State, bool) {
	switch slurmState {
	case "PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD":
		return glidein.Queued, true
	case "RUNNING", "SIGNALING", "STAGE_OUT", "RESIZING", "SUSPENDED", "STOPPED":
		return glidein.Running, true
	case "COMPLETING":
		// The job ended (completed, cancelled, failed: squeue does not say
		// which until it is done) and Slurm is killing what is left of it;
		// its agent no longer runs jobs, so its index is free. Taking it
		// for running would keep a glidein that scancel ended, or one that
		// left by itself, for one more apply.
		return glidein.Finishing, true
	case "COMPLETED":
		return glidein.Done, true
	case "FAILED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE", "PREEMPTED", "SPECIAL_EXIT", "REVOKED":
		return glidein.Failed, true
	case "CANCELLED":
		return glidein.Cancelled, true
	}
	return glidein.Queued, false
}

// glideinOf is the glidein a job is, when its name or comment starts with
// prefix.
func glideinOf(j job, prefix string) (glidein.Glidein, bool) {
	id := ""
	switch {
	case strings.HasPrefix(j.name, prefix) && batch.CheckID(j.name) == nil:
		id = j.name
	case strings.HasPrefix(j.comment, prefix) && batch.CheckID(j.comment) == nil:
		// Renamed behind pond's back: the comment still says.
		id = j.comment
	default:
		return glidein.Glidein{}, false
	}
	state, known := stateOf(j.state)
	g := glidein.Glidein{
		ID:        id,
		SiteID:    j.id,
		State:     state,
		Reason:    reasonOf(j, state, known),
		Submitted: j.submit,
	}
	if state != glidein.Queued {
		g.Host = hostOf(j.nodes)
		g.Started = j.start
	}
	if state.Ended() {
		g.Ended = j.end
	}
	return g, true
}

func hostOf(nodes string) string {
	switch nodes {
	case "", "None assigned", "(null)", "None":
		return ""
	}
	return nodes
}

// reasonOf says why a job is where it is, in a few words.
func reasonOf(j job, state glidein.State, known bool) string {
	reason := j.reason
	switch reason {
	case "None", "(null)", "":
		reason = ""
	}
	if !known {
		return strings.TrimSpace("Slurm state " + j.state + " " + reason)
	}
	switch state {
	case glidein.Queued:
		return reason
	case glidein.Running:
		if j.state != "RUNNING" {
			return j.state
		}
		return ""
	case glidein.Finishing:
		return "COMPLETING: ended, its final state not known yet"
	case glidein.Done:
		return ""
	}
	var parts []string
	parts = append(parts, j.state)
	if j.by != "" {
		parts = append(parts, "by uid "+j.by)
	}
	if reason != "" && reason != "NonZeroExitCode" {
		parts = append(parts, "("+reason+")")
	}
	if code, sig, ok := strings.Cut(j.exit, ":"); ok {
		switch {
		case code == strconv.Itoa(glidein.ExitValidation):
			// The glidein's own code for a failed validation: why, from
			// its status file when it could be read.
			why := j.detail
			if why == "" {
				why = "validation failed"
			}
			parts = append(parts, "exit code "+code+": "+why)
		case code != "0" && code != "":
			parts = append(parts, "exit code "+code)
		}
		if sig != "0" && sig != "" {
			parts = append(parts, "signal "+sig)
		}
	} else if reason == "NonZeroExitCode" {
		parts = append(parts, "non-zero exit code")
	}
	return strings.Join(parts, " ")
}
