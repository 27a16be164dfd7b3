package schedd

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/pond-htc/pond/condor/joblog"
	"github.com/pond-htc/pond/condor/jobqueue"
	"github.com/pond-htc/pond/condor/submit"
	"github.com/pond-htc/pond/condor/wire"
)

// Submit stores a cluster in one transaction, writes its submit events and
// asks the negotiator for a cycle. When Submit answers, the jobs are durable.
func (s *Schedd) Submit(ctx context.Context, req *wire.SubmitRequest) (*wire.SubmitResponse, error) {
	build, err := s.builder(req)
	if err != nil {
		return nil, err
	}
	cluster, err := s.q.SubmitFunc(ctx, func(cluster int) ([]jobqueue.Ad, error) { return build(ctx, cluster) })
	if err != nil {
		return nil, fmt.Errorf("submitting: %w", err)
	}
	jobs, err := s.q.Query(ctx, jobqueue.ClusterJobs(cluster), nil)
	if err != nil {
		return nil, fmt.Errorf("reading submitted cluster %d: %w", cluster, err)
	}
	for _, j := range jobs {
		ij, err := newIdleJob(j)
		if err != nil {
			continue
		}
		s.writeEvent(ctx, j.ID, ij.ad, joblog.Event{Type: joblog.Submit, Host: "<" + s.opts.Address + ">"})
		if j.Status == jobqueue.Idle {
			s.mu.Lock()
			s.idle.put(j.ID, ij)
			s.mu.Unlock()
		}
	}
	s.markDirty()
	s.reschedule()
	return &wire.SubmitResponse{Cluster: cluster, Jobs: len(jobs)}, nil
}

// builder returns the function that makes a submission's job ads for the
// cluster id the queue allocates: from the submit description file it
// carries, or from its ready job ads.
func (s *Schedd) builder(req *wire.SubmitRequest) (func(ctx context.Context, cluster int) ([]jobqueue.Ad, error), error) {
	if req.File == "" {
		if len(req.Jobs) == 0 {
			return nil, fmt.Errorf("%w: submit of no jobs", wire.ErrBadRequest)
		}
		return func(_ context.Context, cluster int) ([]jobqueue.Ad, error) { return s.readyJobs(req.Jobs, cluster) }, nil
	}
	f, err := submit.Parse(firstNonEmpty(req.FileName, "submit"), []byte(req.File))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", wire.ErrBadRequest, err)
	}
	return func(ctx context.Context, cluster int) ([]jobqueue.Ad, error) { return s.fileJobs(ctx, f, req, cluster) }, nil
}

// readyJobs gives submitted job ads their GlobalJobId.
func (s *Schedd) readyJobs(jobs []wire.Ad, cluster int) ([]jobqueue.Ad, error) {
	built := make([]jobqueue.Ad, 0, len(jobs))
	for i, j := range jobs {
		if _, ok := j["Owner"]; !ok {
			return nil, fmt.Errorf("%w: job %d has no Owner", wire.ErrBadRequest, i)
		}
		a := make(jobqueue.Ad, len(j)+2)
		for k, v := range j {
			a[k] = v
		}
		a["GlobalJobId"] = strconv.Quote(fmt.Sprintf("%s#%d.%d#%d", s.opts.Name, cluster, i, s.now().Unix()))
		built = append(built, a)
	}
	return built, nil
}

// fileJobs expands a submit description file for a cluster, in the
// submitter's context.
func (s *Schedd) fileJobs(ctx context.Context, f *submit.File, req *wire.SubmitRequest, cluster int) ([]jobqueue.Ad, error) {
	fs, _ := s.opts.Config.Get("FILESYSTEM_DOMAIN")
	jobs, err := f.Jobs(ctx, submit.Options{ClusterID: cluster, Owner: req.Owner, UIDDomain: s.uid,
		SubmitDir: req.SubmitDir, Env: req.Env, Macros: req.Macros, ScheddName: s.opts.Name,
		FileSystemDomain: firstNonEmpty(fs, s.opts.Name),
		LookupEnv: func(name string) (string, bool) {
			for _, e := range req.Env {
				if k, v, ok := strings.Cut(e, "="); ok && k == name {
					return v, true
				}
			}
			return "", false
		}})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", wire.ErrBadRequest, err)
	}
	return jobs, nil
}
