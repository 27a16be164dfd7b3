package schedd

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/jobqueue"
	"github.com/pond-htc/pond/condor/wire"
)

func selectors(args []string, constraint string) ([]jobqueue.Selector, error) {
	match, err := wire.Constraint(constraint)
	if err != nil {
		return nil, err
	}
	var cons func(jobqueue.Job) bool
	var filter jobqueue.Filter
	if e, err := classad.ParseExpr(constraint); err == nil && !isTrue(e) {
		filter = prefilter(e)
		refs, _ := classad.References(e)
		dynamic := mayLookUpByName(constraint)
		cons = func(j jobqueue.Job) bool {
			ad, err := constraintAd(j.Ad, refs, dynamic)
			return err == nil && match(ad)
		}
	}
	if len(args) == 0 {
		return []jobqueue.Selector{{All: true, Constraint: cons, Filter: filter}}, nil
	}
	var sels []jobqueue.Selector
	for _, a := range args {
		sel, err := jobqueue.ParseSelector(a)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", wire.ErrBadRequest, err)
		}
		sel.Constraint, sel.Filter = cons, filter
		sels = append(sels, sel)
	}
	return sels, nil
}

// isTrue reports whether e is the literal true, the constraint
// HTCondor's clients send when they have none.
func isTrue(e classad.Expr) bool {
	v, ok := classad.Literal(e)
	if !ok {
		return false
	}
	b, ok := v.BoolValue()
	return ok && b
}

// mayLookUpByName reports whether an expression's text calls a function
// that may read attributes it does not name (eval of a string, or a
// function given an attribute's name), so that only the whole ad
// evaluates it as it would evaluate on the whole ad.
func mayLookUpByName(text string) bool {
	l := strings.ToLower(text)
	return strings.Contains(l, "eval") || strings.Contains(l, "unparse") || strings.Contains(l, "[")
}

// constraintAd returns the ClassAd a constraint reading the attributes
// refs (lower-case) is evaluated on: those attributes of the job ad a and,
// in turn, those they read, rather than every attribute of the job, whose
// parsing cost tens of kilobytes of allocation a job on every query of the
// queue. With dynamic (see mayLookUpByName), or when an attribute read
// itself may look others up by name, it is the whole ad.
func constraintAd(a wire.Ad, refs []string, dynamic bool) (*classad.Ad, error) {
	if dynamic {
		return wire.ToClassAd(a)
	}
	ad := classad.NewAd()
	todo := append([]string(nil), refs...)
	for len(todo) > 0 {
		name := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		if _, done := ad.Lookup(name); done {
			continue
		}
		for k, v := range a {
			if !strings.EqualFold(k, name) {
				continue
			}
			if mayLookUpByName(v) {
				return wire.ToClassAd(a)
			}
			if err := ad.SetExpr(k, v); err != nil {
				return nil, fmt.Errorf("attribute %s: %w", k, err)
			}
			e, _ := ad.Lookup(k)
			more, _ := classad.References(e)
			todo = append(todo, more...)
			break
		}
	}
	return ad, nil
}

// prefilter returns a condition on the job queue's indexed columns
// (ClusterId, ProcId, JobStatus, Owner) that every job ad e is true of
// meets, so that the queue reads only the jobs that may match, through its
// indexes, before e is evaluated on each of them. It is conservative: a
// part of e it does not understand accepts every job. It understands &&,
// || and the comparisons of those attributes with literals, which hold of
// the ad exactly when of the columns: the queue keeps them equal, and they
// cannot be edited.
func prefilter(e classad.Expr) jobqueue.Filter {
	f, _ := exactPrefilter(e)
	return f
}

// exactPrefilter is prefilter, and whether the condition is e itself: e
// is made only of what prefilter understands (&&, ||, and comparisons of
// ClusterId, ProcId and JobStatus with integer literals and of Owner with
// == or "is" and a string), so that a job ad is true of e exactly when
// its columns meet the condition, and e need not be evaluated on any ad.
// Each comparison is then true or false of every job, never undefined,
// and && and || of those are what SQL's AND and OR are.
func exactPrefilter(e classad.Expr) (jobqueue.Filter, bool) {
	if op, x, y, ok := classad.Logic(e); ok {
		// x && y is true only when both are; x || y when either is.
		fx, ex := exactPrefilter(x)
		fy, ey := exactPrefilter(y)
		if op == "&&" {
			return jobqueue.AllOf(fx, fy), ex && ey
		}
		return jobqueue.AnyOf(fx, fy), ex && ey
	}
	attr, op, lit, ok := classad.AttrCompare(e)
	if !ok {
		return jobqueue.Filter{}, false
	}
	var col jobqueue.Column
	switch strings.ToLower(attr) {
	case "owner":
		s, isString := lit.StringValue()
		switch {
		case !isString:
		case op == "==":
			// == compares strings regardless of ASCII case, as SQLite's
			// NOCASE does.
			return jobqueue.OwnerIs(s, true), true
		case op == "is":
			return jobqueue.OwnerIs(s, false), true
		}
		return jobqueue.Filter{}, false
	case "clusterid":
		col = jobqueue.ClusterCol
	case "procid":
		col = jobqueue.ProcCol
	case "jobstatus":
		col = jobqueue.StatusCol
	default:
		return jobqueue.Filter{}, false
	}
	n, isInt := lit.IntValue()
	if !isInt {
		return jobqueue.Filter{}, false
	}
	cmp := map[string]jobqueue.CmpOp{"==": jobqueue.Eq, "is": jobqueue.Eq, "!=": jobqueue.Ne, "isnt": jobqueue.Ne,
		"<": jobqueue.Lt, "<=": jobqueue.Le, ">": jobqueue.Gt, ">=": jobqueue.Ge}[op]
	if cmp == "" {
		return jobqueue.Filter{}, false
	}
	return jobqueue.IntFilter(col, cmp, n), true
}

// exactSelectors turns the selections of a constraint exactPrefilter
// finds exact into ones of its condition alone (jobqueue.Selector's
// Exact): the queue then selects their jobs through its indexes without
// reading or evaluating any ad.
func exactSelectors(sels []jobqueue.Selector, constraint string) {
	if strings.TrimSpace(constraint) == "" {
		return
	}
	e, err := classad.ParseExpr(constraint)
	if err != nil {
		return
	}
	f, exact := exactPrefilter(e)
	if !exact {
		return
	}
	for i := range sels {
		sels[i].Constraint, sels[i].Filter, sels[i].Exact = nil, f, true
	}
}

// querySelectors returns the selections of a query: its arguments and
// constraint (see selectors), narrowed to its JobStatus values.
func querySelectors(req *wire.QueryJobsRequest) ([]jobqueue.Selector, error) {
	sels, err := selectors(req.Args, req.Constraint)
	if err != nil || len(req.Status) == 0 {
		return sels, err
	}
	sts := make([]jobqueue.Status, len(req.Status))
	for i, v := range req.Status {
		if v < int(jobqueue.Idle) || v > int(jobqueue.Suspended) {
			return nil, fmt.Errorf("%w: JobStatus %d is none of %d to %d", wire.ErrBadRequest, v, jobqueue.Idle, jobqueue.Suspended)
		}
		sts[i] = jobqueue.Status(v)
	}
	for i := range sels {
		sels[i].Statuses = sts
	}
	return sels, nil
}

// QueryJobs answers condor_q.
func (s *Schedd) QueryJobs(ctx context.Context, req *wire.QueryJobsRequest) (*wire.QueryJobsResponse, error) {
	sels, err := querySelectors(req)
	if err != nil {
		return nil, err
	}
	out := &wire.QueryJobsResponse{Jobs: []wire.Job{}}
	seen := map[jobqueue.JobID]bool{}
	for _, sel := range sels {
		jobs, err := s.q.Query(ctx, sel, nil)
		if err != nil {
			return nil, fmt.Errorf("querying jobs: %w", err)
		}
		for _, j := range jobs {
			if !seen[j.ID] {
				seen[j.ID] = true
				out.Jobs = append(out.Jobs, wire.Job{ID: j.ID.String(), Ad: wire.Project(j.Ad, req.Projection)})
			}
		}
	}
	return out, nil
}

// History answers condor_history, most recent first.
func (s *Schedd) History(ctx context.Context, req *wire.QueryJobsRequest) (*wire.QueryJobsResponse, error) {
	out := &wire.QueryJobsResponse{Jobs: []wire.Job{}}
	err := s.EachHistory(ctx, req, func(j wire.Job) error {
		out.Jobs = append(out.Jobs, j)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// EachHistory streams the finished jobs a condor_history query selects to
// fn, most recent first, with the projection asked for, at most
// req.Limit of each selection, reading the history a page at a time (see
// jobqueue.Queue.ScanHistory). An error of fn ends it and is returned.
func (s *Schedd) EachHistory(ctx context.Context, req *wire.QueryJobsRequest, fn func(wire.Job) error) error {
	sels, err := querySelectors(req)
	if err != nil {
		return err
	}
	var attrs []string
	if len(req.Projection) > 0 {
		attrs = req.Projection
	}
	for _, sel := range sels {
		err := s.q.ScanHistory(ctx, jobqueue.HistoryQuery{Sel: sel, Limit: req.Limit, Attrs: attrs}, func(j jobqueue.Job) error {
			return fn(wire.Job{ID: j.ID.String(), Ad: j.Ad})
		})
		if err != nil {
			return fmt.Errorf("reading history: %w", err)
		}
	}
	return nil
}

// EachJob streams the queued jobs a condor q query selects to fn, in job
// id order, with the projection asked for, reading the queue a page at a
// time (see jobqueue.Queue.Scan): its memory does not grow with the queue
// and a slow reader holds no read of the database. An error of fn (the
// client went away) ends it and is returned.
func (s *Schedd) EachJob(ctx context.Context, req *wire.QueryJobsRequest, fn func(wire.Job) error) error {
	sels, err := querySelectors(req)
	if err != nil {
		return err
	}
	var attrs []string
	if len(req.Projection) > 0 {
		attrs = req.Projection
	}
	// Selections may overlap (a cluster and its owner): a job is sent
	// once. One selection, the common case, needs no memory of them.
	var seen map[jobqueue.JobID]bool
	if len(sels) > 1 {
		seen = map[jobqueue.JobID]bool{}
	}
	for _, sel := range sels {
		err := s.q.Scan(ctx, sel, attrs, func(j jobqueue.Job) error {
			if seen != nil {
				if seen[j.ID] {
					return nil
				}
				seen[j.ID] = true
			}
			return fn(wire.Job{ID: j.ID.String(), Ad: j.Ad})
		})
		if err != nil {
			return fmt.Errorf("querying jobs: %w", err)
		}
	}
	return nil
}

// QueueSummary answers condor q's default view: the jobs a query selects
// counted by cluster, owner, batch name and state. Without a constraint
// the job queue counts them (one GROUP BY, no ad read); with one, each
// job's ad is read and tested a page at a time, and only the counts are
// kept.
func (s *Schedd) QueueSummary(ctx context.Context, req *wire.QueryJobsRequest) (*wire.QueueSummaryResponse, error) {
	sels, err := querySelectors(req)
	if err != nil {
		return nil, err
	}
	out := &wire.QueueSummaryResponse{Groups: []wire.QueueGroup{}}
	if len(sels) == 1 && sels[0].Constraint == nil {
		counts, err := s.q.ClusterCounts(ctx, sels[0])
		if err != nil {
			return nil, fmt.Errorf("counting jobs: %w", err)
		}
		for _, c := range counts {
			out.Groups = append(out.Groups, wire.QueueGroup{Cluster: c.Cluster, Owner: c.Owner, BatchName: batchName(c.BatchName),
				Status: int(c.Status), Jobs: c.Jobs, FirstProc: c.FirstProc, LastProc: c.LastProc, QDate: c.QDate})
		}
		return out, s.summaryFactories(ctx, out)
	}
	type key struct {
		cluster int
		owner   string
		batch   string
		status  int
	}
	groups := map[key]int{} // index in out.Groups
	err = s.EachJob(ctx, &wire.QueryJobsRequest{Args: req.Args, Status: req.Status, Constraint: req.Constraint,
		Projection: []string{"ClusterId", "ProcId", "Owner", "JobStatus", "QDate", "JobBatchName"}}, func(j wire.Job) error {
		id, err := jobqueue.ParseJobID(j.ID)
		if err != nil {
			return err
		}
		status, _ := strconv.Atoi(strings.TrimSpace(lookupAttr(j.Ad, "JobStatus")))
		qdate, _ := strconv.ParseInt(strings.TrimSpace(lookupAttr(j.Ad, "QDate")), 10, 64)
		owner, _ := classad.ParseExpr(lookupAttr(j.Ad, "Owner"))
		o := ""
		if owner != nil {
			o, _ = classad.NewAd().EvalExpr(owner).StringValue()
		}
		k := key{id.Cluster, o, batchName(lookupAttr(j.Ad, "JobBatchName")), status}
		i, ok := groups[k]
		if !ok {
			i = len(out.Groups)
			groups[k] = i
			out.Groups = append(out.Groups, wire.QueueGroup{Cluster: id.Cluster, Owner: o, BatchName: k.batch, Status: status,
				FirstProc: id.Proc, LastProc: id.Proc, QDate: qdate})
		}
		g := &out.Groups[i]
		g.Jobs++
		g.FirstProc, g.LastProc, g.QDate = min(g.FirstProc, id.Proc), max(g.LastProc, id.Proc), min(g.QDate, qdate)
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.SliceStable(out.Groups, func(a, b int) bool {
		ga, gb := out.Groups[a], out.Groups[b]
		if ga.Cluster != gb.Cluster {
			return ga.Cluster < gb.Cluster
		}
		return ga.FirstProc < gb.FirstProc
	})
	return out, s.summaryFactories(ctx, out)
}

// summaryFactories adds to a summary the job factories of its clusters.
func (s *Schedd) summaryFactories(ctx context.Context, out *wire.QueueSummaryResponse) error {
	fs, err := s.q.Factories(ctx)
	if err != nil || len(fs) == 0 {
		return err
	}
	in := make(map[int]bool, len(out.Groups))
	for _, g := range out.Groups {
		in[g.Cluster] = true
	}
	for _, f := range fs {
		if in[f.Cluster] {
			out.Factories = append(out.Factories, wire.QueueFactory{Cluster: f.Cluster, Owner: f.Owner, Total: f.Total, Next: f.Next})
		}
	}
	return nil
}

// lookupAttr returns the value of attribute name of a, whatever its case.
func lookupAttr(a wire.Ad, name string) string {
	if v, ok := a[name]; ok {
		return v
	}
	for k, v := range a {
		if strings.EqualFold(k, name) {
			return v
		}
	}
	return ""
}

// batchName is the string a JobBatchName's ClassAd text evaluates to, ""
// for none.
func batchName(text string) string {
	if strings.TrimSpace(text) == "" {
		return ""
	}
	e, err := classad.ParseExpr(text)
	if err != nil {
		return ""
	}
	v, _ := classad.NewAd().EvalExpr(e).StringValue()
	return v
}
