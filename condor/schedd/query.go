package schedd

import (
	"context"
	"fmt"
	"strings"

	"github.com/pond-htc/pond/condor/jobqueue"
	"github.com/pond-htc/pond/condor/wire"
)

func selectors(args []string, constraint string) ([]jobqueue.Selector, error) {
	match, err := wire.Constraint(constraint)
	if err != nil {
		return nil, err
	}
	cons := func(j jobqueue.Job) bool {
		ad, err := wire.ToClassAd(j.Ad)
		return err == nil && match(ad)
	}
	if strings.TrimSpace(constraint) == "" {
		cons = nil
	}
	if len(args) == 0 {
		return []jobqueue.Selector{{All: true, Constraint: cons}}, nil
	}
	var sels []jobqueue.Selector
	for _, a := range args {
		sel, err := jobqueue.ParseSelector(a)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", wire.ErrBadRequest, err)
		}
		sel.Constraint = cons
		sels = append(sels, sel)
	}
	return sels, nil
}

// QueryJobs answers condor_q.
func (s *Schedd) QueryJobs(ctx context.Context, req *wire.QueryJobsRequest) (*wire.QueryJobsResponse, error) {
	sels, err := selectors(req.Args, req.Constraint)
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
	sels, err := selectors(req.Args, req.Constraint)
	if err != nil {
		return nil, err
	}
	out := &wire.QueryJobsResponse{Jobs: []wire.Job{}}
	for _, sel := range sels {
		jobs, err := s.q.History(ctx, jobqueue.HistoryQuery{Sel: sel, Limit: req.Limit})
		if err != nil {
			return nil, fmt.Errorf("reading history: %w", err)
		}
		for _, j := range jobs {
			out.Jobs = append(out.Jobs, wire.Job{ID: j.ID.String(), Ad: wire.Project(j.Ad, req.Projection)})
		}
	}
	return out, nil
}
