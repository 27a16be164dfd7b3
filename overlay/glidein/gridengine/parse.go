package gridengine

import (
	"bufio"
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/pond-htc/pond/overlay/glidein"
	"github.com/pond-htc/pond/overlay/glidein/batch"
)

// job is one job as qstat or qacct shows it.
type job struct {
	id, name, owner string
	// state is qstat's state letters ("qw", "r", "Eqw", "z"); empty for
	// a job of qacct.
	state string
	// queue is QUEUE@HOST of a job that runs; host the host of one that
	// ran (qacct).
	queue, host          string
	submit, start, end   time.Time
	failed, exit, reason string // qacct's
	ended                bool   // a job of qacct, or a zombie of qstat
}

// parseJobID reads what qsub -terse says: JOBID, or JOBID.TASKS of an
// array job, on its first line.
func parseJobID(out []byte) (string, error) {
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	id, _, _ := strings.Cut(strings.TrimSpace(line), ".")
	if n, err := strconv.ParseUint(id, 10, 64); err != nil || n == 0 {
		return "", fmt.Errorf("qsub -terse said %q, not a job id", out)
	}
	return id, nil
}

// qstatJob is a job_list element of qstat -xml.
type qstatJob struct {
	Kind   string `xml:"state,attr"`
	Number string `xml:"JB_job_number"`
	Name   string `xml:"JB_name"`
	Owner  string `xml:"JB_owner"`
	State  string `xml:"state"`
	Submit string `xml:"JB_submission_time"`
	Start  string `xml:"JAT_start_time"`
	Queue  string `xml:"queue_name"`
	Tasks  string `xml:"tasks"`
}

// maxJobs bounds how many jobs a listing is read of: a queue larger
// than that is not one user's glideins.
const maxJobs = 1 << 20

// parseQstat reads qstat -xml: every job_list element, wherever it is
// (under queue_info for a running job, job_info for the others).
func parseQstat(data []byte) ([]job, error) {
	d := xml.NewDecoder(bytes.NewReader(data))
	d.Strict = true
	var jobs []job
	root := false
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			if !root {
				return nil, errors.New("qstat -xml: no job_info element")
			}
			return jobs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("qstat -xml: %w", err)
		}
		se, ok := tok.(xml.StartElement)
		if ok && se.Name.Local == "job_info" {
			root = true
		}
		if !ok || se.Name.Local != "job_list" {
			continue
		}
		var q qstatJob
		if err := d.DecodeElement(&q, &se); err != nil {
			return nil, fmt.Errorf("qstat -xml: %w", err)
		}
		if len(jobs) >= maxJobs {
			return nil, fmt.Errorf("qstat -xml: more than %d jobs", maxJobs)
		}
		j := job{
			id: strings.TrimSpace(q.Number), name: strings.TrimSpace(q.Name), owner: strings.TrimSpace(q.Owner),
			state: strings.TrimSpace(q.State), queue: strings.TrimSpace(q.Queue),
			submit: qstatTime(q.Submit), start: qstatTime(q.Start),
		}
		j.ended = q.Kind == "zombie" || j.state == "z"
		if j.id == "" {
			return nil, errors.New("qstat -xml: a job_list without JB_job_number")
		}
		jobs = append(jobs, j)
	}
}

// qstatTime reads qstat -xml's local times, 2006-01-02T15:04:05 with or
// without milliseconds; zero when it cannot.
func qstatTime(s string) time.Time {
	s = strings.TrimSpace(s)
	for _, layout := range []string{"2006-01-02T15:04:05", "2006-01-02T15:04:05.000"} {
		if t, err := time.ParseInLocation(layout, s, time.Local); err == nil {
			return t
		}
	}
	return time.Time{}
}

// maxRecordLine bounds one line of qacct's output.
const maxRecordLine = 64 << 10

// parseQacct reads qacct -j: records separated by lines of '=', each
// "KEY VALUE" lines.
func parseQacct(data []byte) ([]job, error) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 4096), maxRecordLine)
	var jobs []job
	var cur map[string]string
	flush := func() error {
		if cur == nil {
			return nil
		}
		defer func() { cur = nil }()
		if cur["jobnumber"] == "" {
			return nil
		}
		if len(jobs) >= maxJobs {
			return fmt.Errorf("qacct: more than %d jobs", maxJobs)
		}
		failed, reason, _ := strings.Cut(cur["failed"], ":")
		jobs = append(jobs, job{
			id: cur["jobnumber"], name: cur["jobname"], owner: cur["owner"], host: cur["hostname"],
			submit: qacctTime(cur["qsub_time"]), start: qacctTime(cur["start_time"]), end: qacctTime(cur["end_time"]),
			failed: strings.TrimSpace(failed), reason: strings.TrimSpace(reason), exit: cur["exit_status"], ended: true,
		})
		return nil
	}
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "=====") {
			if err := flush(); err != nil {
				return nil, err
			}
			cur = map[string]string{}
			continue
		}
		if cur == nil || line == "" {
			continue
		}
		k, v, _ := strings.Cut(line, " ")
		cur[k] = strings.TrimSpace(v)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("qacct: %w", err)
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return jobs, nil
}

// qacctTime reads qacct's local times, "Sun Nov 29 11:46:37 2026"; zero
// for "-/-", undefined or what it cannot read.
func qacctTime(s string) time.Time {
	t, err := time.ParseInLocation("Mon Jan _2 15:04:05 2006", strings.TrimSpace(s), time.Local)
	if err != nil || t.Unix() <= 0 {
		return time.Time{}
	}
	return t
}

// stateOf is the glidein state of a job of qstat (its state letters) or
// qacct, and a few words on why when it did not run or end as it should.
func stateOf(j job) (glidein.State, string) {
	if j.state == "z" {
		// Ended, but only qacct says how, once it has the job.
		return glidein.Finishing, "ended; not yet in qacct"
	}
	if j.ended {
		switch {
		case j.failed != "" && j.failed != "0":
			return glidein.Failed, strings.TrimSpace("failed " + j.failed + " " + j.reason + ", exit status " + j.exit)
		case j.exit != "" && j.exit != "0":
			return glidein.Failed, "exit status " + j.exit
		}
		return glidein.Done, ""
	}
	st := j.state
	switch {
	case strings.Contains(st, "E"):
		// Eqw: the job failed to start and waits in error until the
		// user clears or deletes it.
		return glidein.Failed, "Grid Engine state " + st + " (job in error)"
	case strings.Contains(st, "d"):
		return glidein.Cancelled, "being deleted"
	case strings.ContainsAny(st, "rtR"):
		if strings.ContainsAny(st, "sST") {
			return glidein.Running, "suspended"
		}
		return glidein.Running, ""
	case strings.ContainsAny(st, "qwh"):
		if strings.Contains(st, "h") {
			return glidein.Queued, "on hold"
		}
		return glidein.Queued, ""
	case strings.ContainsAny(st, "sST"):
		return glidein.Running, "suspended"
	}
	return glidein.Queued, "Grid Engine state " + st
}

// live reports whether a job of qstat may still run processes: it is not
// a zombie.
func live(j job) bool { return !j.ended && j.state != "z" }

// glideinOf is the glidein j is, when its name is a glidein ID of prefix.
func glideinOf(j job, prefix string) (glidein.Glidein, bool) {
	if !strings.HasPrefix(j.name, prefix) || batch.CheckID(j.name) != nil {
		return glidein.Glidein{}, false
	}
	state, reason := stateOf(j)
	g := glidein.Glidein{ID: j.name, SiteID: j.id, State: state, Reason: reason, Submitted: j.submit}
	if state != glidein.Queued {
		g.Started = j.start
		g.Host = j.host
		if _, host, ok := strings.Cut(j.queue, "@"); ok {
			g.Host = host
		}
	}
	if state.Ended() {
		g.Ended = j.end
	}
	return g, true
}
