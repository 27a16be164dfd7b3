package schedd

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/condor/cedar"
	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/jobqueue"
	"github.com/pond-htc/pond/condor/wire"
)

// HTCondor's schedd command numbers served over CEDAR.
const (
	CmdActOnJobs           = 478  // ACT_ON_JOBS: hold, release, remove
	CmdQueryHistory        = 515  // QUERY_SCHEDD_HISTORY
	CmdQueryJobAds         = 516  // QUERY_JOB_ADS
	CmdQueryJobAdsWithAuth = 519  // QUERY_JOB_ADS_WITH_AUTH
	CmdQmgmtRead           = 1111 // QMGMT_READ_CMD
	CmdQmgmtWrite          = 1112 // QMGMT_WRITE_CMD: submit and edit
)

// QmgmtSession bounds one queue-management session: a submit of
// MaxTransactionProcs procs has this long from the handshake to its
// commit's answer, each request arriving within the server's timeout.
const QmgmtSession = 30 * time.Minute

// QuerySession bounds one job or history query: the answer of a big
// queue streams for up to this long, the client taking each ad within the
// server's timeout.
const QuerySession = 10 * time.Minute

// CedarCommands returns the schedd's commands for a cedar.Server: the job
// and history queries HTCondor's clients send (READ, as the JSON query
// routes), the actions on jobs and the queue-management protocol of
// submit and edit (WRITE, as the JSON submit and act routes: a caller
// acts on its own jobs, an administrator on anyone's). current returns the
// schedd running now (nil when none does).
func CedarCommands(current func() *Schedd) map[int]cedar.Command {
	read := []auth.Scope{auth.Read, auth.Write, auth.Administrator, auth.Daemon}
	write := []auth.Scope{auth.Write, auth.Administrator}
	with := func(f func(ctx context.Context, s *Schedd, req *cedar.Request) error) func(context.Context, *cedar.Request) error {
		return func(ctx context.Context, req *cedar.Request) error {
			s := current()
			if s == nil {
				return errors.New("no schedd runs on this node")
			}
			return f(cedarCaller(ctx, req.Identity), s, req)
		}
	}
	query := with(func(ctx context.Context, s *Schedd, req *cedar.Request) error {
		return s.serveCedarQuery(ctx, req.Stream, false, req.Idle)
	})
	return map[int]cedar.Command{
		CmdQueryJobAds:         {Name: "QUERY_JOB_ADS", Need: read, Serve: query, Session: QuerySession},
		CmdQueryJobAdsWithAuth: {Name: "QUERY_JOB_ADS_WITH_AUTH", Need: read, Serve: query, Session: QuerySession},
		CmdQueryHistory: {Name: "QUERY_SCHEDD_HISTORY", Need: read, Session: QuerySession, Serve: with(func(ctx context.Context, s *Schedd, req *cedar.Request) error {
			return s.serveCedarQuery(ctx, req.Stream, true, req.Idle)
		})},
		CmdActOnJobs: {Name: "ACT_ON_JOBS", Need: write, Serve: with(func(ctx context.Context, s *Schedd, req *cedar.Request) error {
			return s.serveCedarAct(ctx, req.Stream)
		})},
		CmdQmgmtRead: {Name: "QMGMT_READ_CMD", Need: read, Session: QmgmtSession, Serve: with(func(ctx context.Context, s *Schedd, req *cedar.Request) error {
			return s.serveQmgmt(ctx, req.Stream, true, req.Idle)
		})},
		CmdQmgmtWrite: {Name: "QMGMT_WRITE_CMD", Need: write, Session: QmgmtSession, Serve: with(func(ctx context.Context, s *Schedd, req *cedar.Request) error {
			return s.serveQmgmt(ctx, req.Stream, false, req.Idle)
		})},
	}
}

// cedarCaller gives ctx the claims of a CEDAR identity under its plain
// user name, the Owner HTCondor gives that user's jobs.
func cedarCaller(ctx context.Context, id *cedar.Identity) context.Context {
	c := &auth.Claims{Subject: id.User}
	if id.Claims != nil {
		c.Scopes = id.Claims.Scopes
	}
	return auth.WithClaims(ctx, c)
}

// projectionOf splits a request's Projection: a string of names joined
// with newlines, commas or spaces (the job query), or a list of name
// strings (the history query).
func projectionOf(q *classad.Ad) []string {
	p, ok := q.EvalAttr("Projection").StringValue()
	if !ok {
		if e, found := q.Lookup("Projection"); found {
			p = e.String()
		}
	}
	return strings.FieldsFunc(p, func(r rune) bool {
		return r == ',' || r == ' ' || r == '\t' || r == '\n' || r == '{' || r == '}' || r == '"'
	})
}

// errEnoughJobs ends a job query's scan once it has sent the jobs the
// client asked for.
var errEnoughJobs = errors.New("the query's limit is reached")

// serveCedarQuery answers QUERY_JOB_ADS(_WITH_AUTH) or, with history,
// QUERY_SCHEDD_HISTORY: the request ad (Requirements, Projection, and
// LimitResults or NumJobMatches), then each matching ad in its own
// message and a last ad with Owner = 0 that carries an error, if any.
//
// With idle set, the client has that long to take each ad.
func (s *Schedd) serveCedarQuery(ctx context.Context, st *cedar.Stream, history bool, idle time.Duration) error {
	progress := func() {
		if idle <= 0 {
			return
		}
		t := time.Now().Add(idle)
		if end, ok := ctx.Deadline(); ok && end.Before(t) {
			t = end
		}
		_ = st.SetDeadline(t)
	}
	q, err := st.GetAd()
	if err != nil {
		return fmt.Errorf("reading the query: %w", err)
	}
	if err := st.EndRead(); err != nil {
		return fmt.Errorf("reading the query: %w", err)
	}
	req := &wire.QueryJobsRequest{Projection: projectionOf(q)}
	if e, ok := q.Lookup("Requirements"); ok {
		req.Constraint = e.String()
	}
	limit, _ := q.EvalAttr("LimitResults").IntValue()
	if history {
		limit, _ = q.EvalAttr("NumJobMatches").IntValue()
		if limit > 0 {
			req.Limit = int(limit)
		}
	}
	last := classad.NewAd()
	last.SetInt("Owner", 0)
	n := 0
	send := func(j wire.Job) error {
		if limit > 0 && int64(n) >= limit {
			return errEnoughJobs
		}
		progress()
		if err := st.PutAttrs(j.Ad, nil); err != nil {
			return fmt.Errorf("job %s: %w", j.ID, err)
		}
		// The job query ends a message after each ad; the history
		// query streams its ads in one message.
		if !history {
			if err := st.EndMessage(); err != nil {
				return err
			}
		}
		n++
		return nil
	}
	// The queue (or the history) is read a page at a time and each ad
	// sent as it is read, so that neither a query of a few jobs
	// (LimitResults, NumJobMatches) nor one of every job holds them in
	// memory, and the first ad goes at once. An error sending (the client
	// went away) ends the query; one reading the jobs ends it with the
	// error in the last ad.
	each := s.EachJob
	if history {
		each = s.EachHistory
	}
	var sendErr error
	err = each(ctx, req, func(j wire.Job) error {
		sendErr = send(j)
		return sendErr
	})
	switch {
	case errors.Is(err, errEnoughJobs):
	case err != nil && sendErr != nil:
		return err
	case err != nil:
		// HTCondor's client reads an error only in the last ad, after
		// whatever ads came before it.
		last.SetInt("ErrorCode", 1)
		last.SetString("ErrorString", err.Error())
		s.log.Warn("cedar job query refused", "err", err, "history", history, "sent", n)
	}
	last.SetInt("NumJobMatches", int64(n))
	progress()
	if err := st.PutAd(last, nil); err != nil {
		return err
	}
	return st.EndMessage()
}

// HTCondor's job actions (JobAction) and action results.
const (
	jaHold    = 1
	jaRelease = 2
	jaRemove  = 3
	jaRemoveX = 4

	arError            = 0
	arSuccess          = 1
	arNotFound         = 2
	arBadStatus        = 3
	arAlreadyDone      = 4
	arPermissionDenied = 5
)

// serveCedarAct answers ACT_ON_JOBS: the request ad names the action
// (JobAction), the jobs (ActionIds "1.0,2" or ActionConstraint) and the
// reason; the schedd answers with the count of each job's result
// (result_total_N, TotalJobAds, ActionResult) and, when some job can be
// acted on, waits for the client's go-ahead before acting, as HTCondor's
// schedd commits the action only once the client has confirmed it.
func (s *Schedd) serveCedarAct(ctx context.Context, st *cedar.Stream) error {
	q, err := st.GetAd()
	if err != nil {
		return fmt.Errorf("reading the action: %w", err)
	}
	if err := st.EndRead(); err != nil {
		return fmt.Errorf("reading the action: %w", err)
	}
	code, _ := q.EvalAttr("JobAction").IntValue()
	var action, reasonAttr string
	var to jobqueue.Status
	switch code {
	case jaHold:
		action, reasonAttr, to = wire.ActHold, "HoldReason", jobqueue.Held
	case jaRelease:
		action, reasonAttr, to = wire.ActRelease, "ReleaseReason", jobqueue.Idle
	case jaRemove, jaRemoveX:
		action, reasonAttr, to = wire.ActRemove, "RemoveReason", jobqueue.Removed
	}
	reason := actionReason(q, reasonAttr)
	totals := make([]int64, 6)
	var ok []string
	var refusal error
	if action == "" {
		refusal = fmt.Errorf("job action %d is not served", code)
	} else {
		ok, refusal = s.actPlan(ctx, q, to, code == jaRelease, totals)
	}
	res := classad.NewAd()
	for i, n := range totals {
		res.SetInt(fmt.Sprintf("result_total_%d", i), n)
	}
	res.SetInt("TotalJobAds", int64(len(ok)))
	if refusal != nil {
		res.SetString("ErrorString", refusal.Error())
	}
	if len(ok) == 0 {
		res.SetInt("ActionResult", 0)
		if err := st.PutAd(res, nil); err != nil {
			return err
		}
		if err := st.EndMessage(); err != nil {
			return err
		}
		if refusal != nil {
			return refusal
		}
		return nil
	}
	res.SetInt("ActionResult", 1)
	if err := st.PutAd(res, nil); err != nil {
		return err
	}
	if err := st.EndMessage(); err != nil {
		return err
	}
	goAhead, err := st.GetInt()
	if err != nil {
		return fmt.Errorf("waiting for the client to confirm the action: %w", err)
	}
	if err := st.EndRead(); err != nil {
		return err
	}
	if goAhead != 1 {
		return nil
	}
	_, err = s.Act(ctx, &wire.ActRequest{Action: action, Args: ok, Reason: reason})
	reply := int64(1)
	if err != nil {
		reply = 0
	}
	if perr := st.PutInt(reply); perr != nil {
		return perr
	}
	if perr := st.EndMessage(); perr != nil {
		return perr
	}
	return err
}

// actPlan finds the jobs an action request names and counts each one's
// result into totals: a job of another owner (unless the caller is an
// administrator) is refused, a job already in the target state is done,
// one whose state does not allow the change has a bad status. It returns
// the ids of the jobs the action will change.
func (s *Schedd) actPlan(ctx context.Context, q *classad.Ad, to jobqueue.Status, release bool, totals []int64) ([]string, error) {
	var sels []jobqueue.Selector
	var named []jobqueue.JobID
	if ids, ok := q.EvalAttr("ActionIds").StringValue(); ok && strings.TrimSpace(ids) != "" {
		for _, f := range strings.FieldsFunc(ids, func(r rune) bool { return r == ',' || r == ' ' }) {
			sel, err := jobqueue.ParseSelector(f)
			if err != nil {
				return nil, fmt.Errorf("action ids: %w", err)
			}
			sels = append(sels, sel)
			if sel.HasProc {
				named = append(named, jobqueue.JobID{Cluster: sel.Cluster, Proc: sel.Proc})
			}
		}
	} else if e, ok := q.Lookup("ActionConstraint"); ok {
		var err error
		if sels, err = selectors(nil, e.String()); err != nil {
			return nil, err
		}
	} else {
		return nil, errors.New("the action names no jobs (ActionIds or ActionConstraint)")
	}
	who := callerOf(ctx)
	seen := map[jobqueue.JobID]bool{}
	var ok []string
	for _, sel := range sels {
		jobs, err := s.q.Query(ctx, sel, []string{"Owner"})
		if err != nil {
			return nil, fmt.Errorf("reading the selected jobs: %w", err)
		}
		for _, j := range jobs {
			if seen[j.ID] {
				continue
			}
			seen[j.ID] = true
			switch {
			case !who.admin && j.Owner != who.name:
				totals[arPermissionDenied]++
			case j.Status == to:
				totals[arAlreadyDone]++
			case release && j.Status != jobqueue.Held, !jobqueue.CanTransition(j.Status, to):
				totals[arBadStatus]++
			default:
				totals[arSuccess]++
				ok = append(ok, j.ID.String())
			}
		}
	}
	for _, id := range named {
		if !seen[id] {
			totals[arNotFound]++
		}
	}
	return ok, nil
}

// actionReason is the reason an action request gives: in the attribute
// of its action (HoldReason, ReleaseReason, RemoveReason) or, from
// clients that name it otherwise, in the one string attribute whose name
// ends in Reason.
func actionReason(q *classad.Ad, attr string) string {
	if r, ok := q.EvalAttr(attr).StringValue(); ok {
		return r
	}
	for _, n := range q.Names() {
		if strings.HasSuffix(strings.ToLower(n), "reason") {
			if r, ok := q.EvalAttr(n).StringValue(); ok {
				return r
			}
		}
	}
	return ""
}
