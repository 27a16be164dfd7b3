package tools

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/negotiator"
	"github.com/pond-htc/pond/condor/wire"
)

// analyzeMax bounds the jobs condor_q -analyze looks at without -limit.
const analyzeMax = 50

// analyzeJobs is condor_q -analyze and -better-analyze: for each job the
// query selects (the idle ones when it names none), why it does not run,
// from its ad, the pool's slots, its schedd's ad and the negotiator's.
func analyzeJobs(ctx context.Context, sc *wire.Schedd, name string, c *common, req *wire.QueryJobsRequest, limit int, env []string, stdout io.Writer) error {
	q := *req
	if len(c.rest) == 0 && c.constraint == "" {
		q.Status = []int{1}
	}
	if limit < 0 {
		limit = analyzeMax + 1
	}
	var jobs []*classad.Ad
	if err := eachUpTo(ctx, sc, &q, limit, func(a *classad.Ad) error {
		jobs = append(jobs, a)
		return nil
	}); err != nil {
		return err
	}
	more := false
	if c.flags["limit"] == "" && len(jobs) > analyzeMax {
		jobs, more = jobs[:analyzeMax], true
	}
	coll, err := collectorOf(ctx, c, env)
	if err != nil {
		return err
	}
	in := analysisInput{Now: time.Now()}
	query := func(typ, cons string) ([]*classad.Ad, error) {
		ws, err := coll.Query(ctx, &wire.QueryAdsRequest{Type: typ, Constraint: cons})
		if err != nil {
			return nil, fmt.Errorf("querying the collector for %s ads: %w", typ, err)
		}
		return ads(ws)
	}
	if in.Slots, err = query(wire.TypeMachine, ""); err != nil {
		return err
	}
	scheds, err := query(wire.TypeSchedd, "Name == "+classad.String(name).String())
	if err != nil {
		return err
	}
	if len(scheds) > 0 {
		in.Schedd = scheds[0]
	}
	negs, err := query(wire.TypeNegotiator, "")
	if err != nil {
		return err
	}
	if len(negs) > 0 {
		in.Negotiator = negs[0]
	}
	out := make([]Analysis, 0, len(jobs))
	for _, j := range jobs {
		in.Job = j
		out = append(out, analyze(in))
	}
	w := bufio.NewWriter(stdout)
	defer w.Flush()
	if c.json {
		b, err := json.MarshalIndent(out, "", "  ")
		if err != nil {
			return err
		}
		w.Write(b)
		w.WriteString("\n")
		return nil
	}
	fmt.Fprintf(w, "\n\n-- Schedd: %s : <%s>\n", name, sc.Addr())
	if in.Negotiator == nil {
		fmt.Fprintln(w, "The pool has no negotiator ad yet: concurrency limits and user priorities are not analyzed.")
	}
	for _, a := range out {
		a.print(w, c.flags["better-analyze"] != "")
	}
	if len(out) == 0 {
		fmt.Fprintln(w, "No job to analyze.")
	}
	if more {
		fmt.Fprintf(w, "The first %d jobs only: name a job, or give -limit, to analyze others.\n", analyzeMax)
	}
	return nil
}

// analysisInput is what condor_q -better-analyze knows of a job and its
// pool: the job's ad, the pool's slot ads, the ad of the job's schedd and
// that of the negotiator (either nil when the collector has none).
type analysisInput struct {
	Job        *classad.Ad
	Slots      []*classad.Ad
	Schedd     *classad.Ad
	Negotiator *classad.Ad
	Now        time.Time
}

// Condition is one conjunct of a job's Requirements and how many slots it
// matches on its own.
type Condition struct {
	Step      int    `json:"Step"`
	Condition string `json:"Condition"`
	Matched   int    `json:"Matched"`
}

// Blocker is one reason an idle job does not run: Kind is "requirements",
// "busy", "schedd-limit", "concurrency-limit" or "priority"; Name names
// the limit (MAX_JOBS_RUNNING, JOB_START_COUNT, a concurrency limit's
// name), the submitter, or the condition; Used and Max are the limit's
// usage and bound.
type Blocker struct {
	Kind    string  `json:"Kind"`
	Name    string  `json:"Name"`
	Used    float64 `json:"Used,omitempty"`
	Max     float64 `json:"Max,omitempty"`
	Message string  `json:"Message"`
}

// Analysis is condor_q -better-analyze's answer for one job, with
// HTCondor's run analysis summary.
type Analysis struct {
	JobID        string      `json:"JobId"`
	Status       string      `json:"Status"`
	HoldReason   string      `json:"HoldReason,omitempty"`
	User         string      `json:"User"`
	Priority     *float64    `json:"UserPriority,omitempty"`
	Requirements string      `json:"Requirements"`
	Attributes   []string    `json:"JobAttributes,omitempty"`
	Conditions   []Condition `json:"Conditions"`
	Slots        int         `json:"Slots"`
	// The run analysis summary: every slot is counted in the first of
	// these that applies to it.
	RejectedByJob  int       `json:"RejectedByJobRequirements"`
	RejectedBySlot int       `json:"RejectedBySlotRequirements"`
	RunningYours   int       `json:"MatchRunningYourJobs"`
	ServingOthers  int       `json:"MatchServingOtherUsers"`
	Unavailable    int       `json:"MatchUnavailable"`
	Available      int       `json:"Available"`
	Blockers       []Blocker `json:"Blockers"`
}

var statusNames = map[int64]string{1: "idle", 2: "running", 3: "removed", 4: "completed", 5: "held", 6: "transferring output", 7: "suspended"}

// analyze works out why in's job does not run.
func analyze(in analysisInput) Analysis {
	job := in.Job
	a := Analysis{JobID: fmt.Sprintf("%03d.%03d", intAttr(job, "ClusterId"), intAttr(job, "ProcId")),
		User: strAttr(job, "User"), Slots: len(in.Slots), Conditions: []Condition{}, Blockers: []Blocker{}}
	st := intAttr(job, "JobStatus")
	a.Status = statusNames[st]
	if a.Status == "" {
		a.Status = fmt.Sprintf("status %d", st)
	}
	a.HoldReason = strAttr(job, "HoldReason")
	owner := strAttr(job, "Owner")
	if a.User == "" {
		a.User = owner
	}
	req, hasReq := job.Lookup("Requirements")
	if hasReq {
		a.Requirements = req.String()
		// The attributes of the job its Requirements read, by the names
		// the job gives them.
		names := map[string]string{}
		for _, n := range job.Names() {
			names[strings.ToLower(n)] = n
		}
		my, _ := classad.References(req)
		for _, l := range my {
			if n, ok := names[l]; ok && l != "requirements" {
				e, _ := job.Lookup(n)
				a.Attributes = append(a.Attributes, n+" = "+e.String())
			}
		}
		sort.Strings(a.Attributes)
		for i, c := range classad.Conjuncts(req) {
			cond := Condition{Step: i, Condition: unparen(c.String())}
			for _, slot := range in.Slots {
				if b, ok := classad.EvalWith(c, job, slot).BoolValue(); ok && b {
					cond.Matched++
				}
			}
			a.Conditions = append(a.Conditions, cond)
		}
	}
	for _, slot := range in.Slots {
		switch {
		case !hasReq || !job.EvalAttrWith("Requirements", slot).IsTrue():
			a.RejectedByJob++
		case !slot.EvalAttrWith("Requirements", job).IsTrue() && strAttr(slot, "State") != "Claimed":
			a.RejectedBySlot++
		case strAttr(slot, "State") == "Claimed":
			if o := strAttr(slot, "RemoteOwner"); o == owner || o == a.User {
				a.RunningYours++
			} else {
				a.ServingOthers++
			}
		case strAttr(slot, "State") == "Unclaimed":
			a.Available++
		default:
			a.Unavailable++
		}
	}
	shares := submitterShares(in.Negotiator)
	if sh, ok := shares[a.User]; ok {
		p := sh.Priority
		a.Priority = &p
	}
	if st != 1 {
		return a
	}
	a.Blockers = append(a.Blockers, requirementBlockers(a)...)
	a.Blockers = append(a.Blockers, scheddBlockers(in)...)
	a.Blockers = append(a.Blockers, limitBlockers(job, in.Negotiator)...)
	a.Blockers = append(a.Blockers, groupBlockers(job, in.Negotiator)...)
	if sh, ok := shares[a.User]; ok && len(shares) > 1 && float64(sh.Running) >= sh.Share && a.Available == 0 {
		better := 0
		for _, o := range shares {
			if o.Name != sh.Name && o.Priority < sh.Priority {
				better++
			}
		}
		a.Blockers = append(a.Blockers, Blocker{Kind: "priority", Name: sh.Name, Used: float64(sh.Running), Max: sh.Share,
			Message: fmt.Sprintf("%s runs %d jobs, its fair share of the pool at user priority %g is %g: the other submitters (%d of them of better priority) are served first",
				sh.Name, sh.Running, sh.Priority, sh.Share, better)})
	}
	return a
}

// requirementBlockers says why no slot may take the job: no slot matches
// its Requirements (naming the condition that rejects the most slots), or
// every slot that matches is busy.
func requirementBlockers(a Analysis) []Blocker {
	matching := a.Slots - a.RejectedByJob
	switch {
	case a.Slots == 0:
		return []Blocker{{Kind: "requirements", Message: "The pool has no slots"}}
	case matching == 0 && len(a.Conditions) > 0:
		worst := a.Conditions[0]
		for _, c := range a.Conditions[1:] {
			if c.Matched < worst.Matched {
				worst = c
			}
		}
		if worst.Matched == a.Slots {
			return []Blocker{{Kind: "requirements", Name: a.Requirements,
				Message: "No slot matches the job's Requirements, though each of its conditions matches some"}}
		}
		return []Blocker{{Kind: "requirements", Name: worst.Condition, Used: float64(worst.Matched), Max: float64(a.Slots),
			Message: fmt.Sprintf("Condition [%d] %s rejects %d of the %d slots", worst.Step, worst.Condition, a.Slots-worst.Matched, a.Slots)}}
	case matching == 0:
		return []Blocker{{Kind: "requirements", Message: "The job has no Requirements: it matches no slot"}}
	case matching == a.RejectedBySlot:
		return []Blocker{{Kind: "requirements", Message: fmt.Sprintf("The %d slots the job matches reject it by their own requirements", matching)}}
	case a.Available == 0:
		return []Blocker{{Kind: "busy", Used: float64(a.RunningYours + a.ServingOthers + a.Unavailable), Max: float64(matching - a.RejectedBySlot),
			Message: fmt.Sprintf("Every one of the %d slots that match the job is busy or unavailable", matching-a.RejectedBySlot)}}
	}
	return nil
}

// scheddBlockers reads the schedd's ad for a start limit that holds its
// idle jobs back: MAX_JOBS_RUNNING, or a full JOB_START_COUNT window.
func scheddBlockers(in analysisInput) []Blocker {
	sc := in.Schedd
	if sc == nil {
		return nil
	}
	var out []Blocker
	maxRun, okMax := sc.EvalAttr("MaxJobsRunning").IntValue()
	started, okStarted := sc.EvalAttr("PondJobsStarted").IntValue()
	if okMax && okStarted && started >= maxRun {
		out = append(out, Blocker{Kind: "schedd-limit", Name: "MAX_JOBS_RUNNING", Used: float64(started), Max: float64(maxRun),
			Message: fmt.Sprintf("The schedd runs %d jobs, MAX_JOBS_RUNNING = %d: the job waits for one to end", started, maxRun)})
	}
	if resume, ok := sc.EvalAttr("PondJobStartsResume").IntValue(); ok && resume > in.Now.Unix() {
		count, _ := sc.EvalAttr("PondJobStartCount").IntValue()
		delay, _ := sc.EvalAttr("PondJobStartDelay").IntValue()
		out = append(out, Blocker{Kind: "schedd-limit", Name: "JOB_START_COUNT", Used: float64(count), Max: float64(count),
			Message: fmt.Sprintf("The schedd started JOB_START_COUNT = %d jobs in its JOB_START_DELAY = %d s window: it starts more in %d s",
				count, delay, resume-in.Now.Unix())})
	}
	return out
}

// limitBlockers reads the negotiator's ad for the job's concurrency
// limits that have no room for it.
func limitBlockers(job, neg *classad.Ad) []Blocker {
	v, ok := job.EvalAttr("ConcurrencyLimits").StringValue()
	if !ok || strings.TrimSpace(v) == "" {
		return nil
	}
	uses, err := negotiator.ParseLimits(v)
	if err != nil {
		return []Blocker{{Kind: "concurrency-limit", Name: v, Message: fmt.Sprintf("The job's ConcurrencyLimits cannot be used (%v): it never matches", err)}}
	}
	if neg == nil {
		return nil
	}
	var out []Blocker
	for _, u := range uses {
		maxV, bounded := neg.EvalAttr(negotiator.LimitMaxAttr(u.Name)).NumberValue()
		if !bounded {
			continue
		}
		used, _ := neg.EvalAttr(negotiator.LimitAttr(u.Name)).NumberValue()
		if used+u.Weight <= maxV+1e-9 {
			continue
		}
		msg := fmt.Sprintf("Concurrency limit %s is full: %g of %g in use, the job needs %g", u.Name, used, maxV, u.Weight)
		if n, ok := neg.EvalAttr(negotiator.LimitBlockedAttr(u.Name)).IntValue(); ok && n > 0 {
			msg += fmt.Sprintf(" (it held back %d idle jobs in the last negotiation cycle)", n)
		}
		out = append(out, Blocker{Kind: "concurrency-limit", Name: u.Name, Used: used, Max: maxV, Message: msg})
	}
	return out
}

// groupBlockers reads the negotiator's ad for the job's accounting group
// (group quotas): the job waits when its group runs its quota and takes
// no surplus, or its quota held jobs back in the last cycle.
func groupBlockers(job, neg *classad.Ad) []Blocker {
	groups := negotiator.ReadGroupQuotas(neg)
	if len(groups) == 0 {
		return nil
	}
	sub := strAttr(job, "AccountingGroup")
	user := strAttr(job, "User")
	if sub == "" {
		sub = user
	} else if at := strings.LastIndexByte(user, '@'); at >= 0 {
		sub += user[at:]
	}
	names := make([]string, len(groups))
	for i, g := range groups {
		names[i] = g.Name
	}
	name := negotiator.AssignGroup(names, sub)
	var g negotiator.GroupQuota
	for _, q := range groups {
		if q.Name == name {
			g = q
		}
	}
	cpus, _ := job.EvalAttr("RequestCpus").NumberValue()
	cpus = max(cpus, 1)
	full := !g.AcceptSurplus && g.Usage+cpus > g.Quota+1e-9
	if !full && g.Blocked == 0 {
		return nil
	}
	knob := "GROUP_QUOTA_" + g.Name
	if !g.Static {
		knob = "GROUP_QUOTA_DYNAMIC_" + g.Name
	}
	if g.Name == negotiator.RootGroup {
		knob = "the pool less the groups' quotas"
	}
	surplus := "it accepts no surplus (GROUP_ACCEPT_SURPLUS)"
	if g.AcceptSurplus {
		surplus = fmt.Sprintf("the surplus it was allocated is %g", g.Allocated)
	}
	msg := fmt.Sprintf("The job's accounting group %s is at its quota: it uses %g of its quota of %g (%s) and %s; the job waits for one of the group's jobs to end",
		g.Name, g.Usage, g.Quota, knob, surplus)
	if g.Blocked > 0 {
		msg += fmt.Sprintf(" (its quota held back %d idle jobs in the last negotiation cycle)", g.Blocked)
	}
	return []Blocker{{Kind: "group-quota", Name: g.Name, Used: g.Usage, Max: g.Quota, Message: msg}}
}

// submitterShares reads the submitters' priorities and fair shares from
// the negotiator's ad, by submitter name.
func submitterShares(neg *classad.Ad) map[string]negotiator.SubmitterShare {
	out := map[string]negotiator.SubmitterShare{}
	if neg == nil {
		return out
	}
	list, _ := neg.EvalAttr(negotiator.SharesAttr).ListValue()
	for _, v := range list {
		r, ok := v.AdValue()
		if !ok {
			continue
		}
		name, _ := r.EvalAttr("Name").StringValue()
		p, _ := r.EvalAttr("Priority").NumberValue()
		run, _ := r.EvalAttr("Running").IntValue()
		share, _ := r.EvalAttr("Share").NumberValue()
		if name != "" && !math.IsNaN(p) {
			out[name] = negotiator.SubmitterShare{Name: name, Priority: p, Running: int(run), Share: share}
		}
	}
	return out
}

// print writes the analysis as HTCondor's condor_q -better-analyze does
// (better) or its shorter -analyze.
func (a Analysis) print(w io.Writer, better bool) {
	if a.Priority != nil {
		fmt.Fprintf(w, "User priority for %s is %.2f.\n", a.User, *a.Priority)
	} else {
		fmt.Fprintf(w, "User priority for %s is not available, attempting to analyze without it.\n", a.User)
	}
	fmt.Fprintln(w, "---")
	switch a.Status {
	case "idle":
	case "held":
		fmt.Fprintf(w, "%s:  Job is held.\n\nHold reason: %s\n\n", a.JobID, a.HoldReason)
	default:
		fmt.Fprintf(w, "%s:  Job is %s.\n\n", a.JobID, a.Status)
	}
	if better {
		fmt.Fprintf(w, "The Requirements expression for job %s is\n\n    %s\n\n", a.JobID, a.Requirements)
		if len(a.Attributes) > 0 {
			fmt.Fprintf(w, "Job %s defines the following attributes:\n\n", a.JobID)
			for _, at := range a.Attributes {
				fmt.Fprintf(w, "    %s\n", at)
			}
			fmt.Fprintln(w)
		}
		if len(a.Conditions) > 0 {
			fmt.Fprintf(w, "The Requirements expression for job %s reduces to these conditions:\n\n", a.JobID)
			fmt.Fprintf(w, "         Slots\nStep    Matched  Condition\n-----  --------  ---------\n")
			for _, c := range a.Conditions {
				fmt.Fprintf(w, "%-5s  %8d  %s\n", fmt.Sprintf("[%d]", c.Step), c.Matched, c.Condition)
			}
			fmt.Fprintln(w)
		}
	}
	fmt.Fprintf(w, "%s:  Run analysis summary.  Of %d slots,\n", a.JobID, a.Slots)
	fmt.Fprintf(w, "  %5d are rejected by your job's requirements\n", a.RejectedByJob)
	fmt.Fprintf(w, "  %5d reject your job because of their own requirements\n", a.RejectedBySlot)
	fmt.Fprintf(w, "  %5d match and are already running your jobs\n", a.RunningYours)
	fmt.Fprintf(w, "  %5d match but are serving other users\n", a.ServingOthers)
	if a.Unavailable > 0 {
		fmt.Fprintf(w, "  %5d match but are not available (owner, draining or drained)\n", a.Unavailable)
	}
	fmt.Fprintf(w, "  %5d are able to run your job\n", a.Available)
	if len(a.Blockers) > 0 {
		fmt.Fprintf(w, "\nWARNING:  Be advised:\n")
		for _, b := range a.Blockers {
			fmt.Fprintf(w, "   %s\n", b.Message)
		}
	}
	fmt.Fprintln(w)
}

// unparen drops the parentheses around the whole of a condition, as
// HTCondor shows it.
func unparen(s string) string {
	for len(s) > 1 && s[0] == '(' && s[len(s)-1] == ')' {
		depth, inStr := 0, false
		for i := 0; i < len(s)-1; i++ {
			switch c := s[i]; {
			case inStr && c == '\\':
				i++
			case c == '"':
				inStr = !inStr
			case !inStr && c == '(':
				depth++
			case !inStr && c == ')':
				depth--
			}
			if depth == 0 {
				return s // the first parenthesis closes before the end
			}
		}
		s = strings.TrimSpace(s[1 : len(s)-1])
	}
	return s
}
