package schedd

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/pond-htc/pond/condor/jobqueue"
	"github.com/pond-htc/pond/condor/submit"
	"github.com/pond-htc/pond/condor/wire"
)

// Late materialization (HTCondor's max_materialize and max_idle): a
// cluster submitted as a job factory is a digest of its submit file in
// the job queue's database, from which the schedd makes its procs, in
// ProcId order, as earlier ones leave the queue (or, for max_idle,
// start). Each batch of procs is made in the transaction that moves the
// factory's counter, so that a crash neither skips nor repeats one.

// factoryInterval is how often the schedd looks for factories with room
// to materialize, besides when a job stops running.
const factoryInterval = time.Second

// factories caches the schedd's job factories, remade from their digests
// on first use after a restart.
type factories struct {
	mu   sync.Mutex
	m    map[int]*submit.Factory
	kick chan struct{}
}

// kickFactories has the factories looked at soon.
func (s *Schedd) kickFactories() {
	select {
	case s.fac.kick <- struct{}{}:
	default:
	}
}

// SubmitFactory commits a reserved cluster as a job factory and makes
// its first procs (condor_submit with max_materialize or max_idle). The
// factory's jobs get the Owner the schedd authenticated, as Submit's do.
// MAX_JOBS_PER_SUBMISSION bounds the jobs the factory makes in all;
// MAX_JOBS_SUBMITTED and MAX_JOBS_PER_OWNER bound the jobs in the queue,
// so a factory waits for room rather than being refused.
func (s *Schedd) SubmitFactory(ctx context.Context, req *wire.SubmitFactoryRequest) (*wire.SubmitResponse, error) {
	if req.Cluster <= 0 {
		return nil, fmt.Errorf("%w: cluster %d: reserve one with NewCluster", wire.ErrBadRequest, req.Cluster)
	}
	if req.MaxMaterialize < 0 || req.MaxIdle < 0 || req.MaxMaterialize+req.MaxIdle == 0 {
		return nil, fmt.Errorf("%w: cluster %d: a job factory needs max_materialize or max_idle above 0 (got %d and %d)",
			wire.ErrBadRequest, req.Cluster, req.MaxMaterialize, req.MaxIdle)
	}
	fa, err := s.digestFactory(ctx, req.Cluster, req.Digest)
	if err != nil {
		return nil, err
	}
	if l := s.lim.Load(); fa.Total() > l.maxPerSubmission {
		return nil, queueLimitError("MAX_JOBS_PER_SUBMISSION")
	}
	h := sha256.New()
	fmt.Fprintf(h, "%d %d %d\n", req.MaxMaterialize, req.MaxIdle, len(req.Digest))
	h.Write(req.Digest)
	// The digest is kept as sent: the factory is remade from it with the
	// schedd's cluster id, name and UID_DOMAIN, and the Owner checked here.
	f := jobqueue.Factory{Cluster: req.Cluster, Owner: fa.Owner(), Digest: req.Digest, Total: fa.Total(),
		Limit: req.MaxMaterialize, MaxIdle: req.MaxIdle}
	s.submitLim.mu.Lock()
	room, err := s.queueRoom(ctx, f.Owner)
	var retry bool
	var made []jobqueue.JobID
	if err == nil {
		retry, made, err = s.q.SubmitFactory(ctx, f, "factory:"+hex.EncodeToString(h.Sum(nil)), room, procBuilder(fa))
	}
	s.submitLim.mu.Unlock()
	switch {
	case errors.Is(err, jobqueue.ErrNoCluster):
		return nil, fmt.Errorf("%w: cluster %d was not reserved (NewCluster first)", wire.ErrNotFound, req.Cluster)
	case errors.Is(err, jobqueue.ErrClusterCommitted):
		return nil, fmt.Errorf("%w: cluster %d was already submitted with other jobs", wire.ErrConflict, req.Cluster)
	case errors.As(err, new(*factoryError)):
		// A first proc that cannot be built: nothing was committed.
		return nil, fmt.Errorf("%w: submitting cluster %d: %w", wire.ErrBadRequest, req.Cluster, err)
	case err != nil:
		return nil, fmt.Errorf("submitting cluster %d: %w", req.Cluster, err)
	}
	s.fac.mu.Lock()
	s.fac.m[req.Cluster] = fa
	s.fac.mu.Unlock()
	if !retry {
		s.log.Info("job factory submitted", "cluster", req.Cluster, "owner", f.Owner, "jobs", f.Total,
			"max_materialize", f.Limit, "max_idle", f.MaxIdle)
		if err := s.announce(ctx, req.Cluster, made); err != nil {
			return nil, err
		}
	}
	s.kickFactories()
	return &wire.SubmitResponse{Cluster: req.Cluster, Jobs: f.Total, Factory: true}, nil
}

// procBuilder makes the procs of a factory as the job queue stores them.
func procBuilder(fa *submit.Factory) func(int) (jobqueue.Ad, error) {
	return func(proc int) (jobqueue.Ad, error) {
		j, err := fa.Job(proc)
		if err != nil {
			return nil, &factoryError{err}
		}
		return jobqueue.Ad(j), nil
	}
}

// factoryError is a factory that cannot make a proc (or be remade): it
// is paused, unlike a factory that met a passing failure of the queue,
// which tries again.
type factoryError struct{ err error }

func (e *factoryError) Error() string { return e.err.Error() }
func (e *factoryError) Unwrap() error { return e.err }

// queueRoom is the number of jobs of owner the queue limits let in now
// (MAX_JOBS_SUBMITTED, MAX_JOBS_PER_OWNER, counted as for a submit).
// s.submitLim.mu must be held through the materialization.
func (s *Schedd) queueRoom(ctx context.Context, owner string) (int, error) {
	l := s.lim.Load()
	if l.maxSubmitted >= math.MaxInt32 && l.maxPerOwner >= math.MaxInt32 {
		return math.MaxInt32, nil
	}
	counts, err := s.q.CountsByOwner(ctx)
	if err != nil {
		return 0, fmt.Errorf("counting the queue's jobs: %w", err)
	}
	q := queueTally(counts)
	return max(0, min(l.maxSubmitted-q.total, l.maxPerOwner-q.byOwner[owner])), nil
}

// announce writes the submit events of procs a factory just made and
// offers the idle ones to the negotiator, as for a submit.
func (s *Schedd) announce(ctx context.Context, cluster int, made []jobqueue.JobID) error {
	if len(made) == 0 {
		return nil
	}
	s.metrics.submitted(len(made))
	return s.submittedSel(ctx, cluster, jobqueue.Selector{Cluster: cluster,
		Constraint: func(j jobqueue.Job) bool { return j.ID.Proc >= made[0].Proc && j.ID.Proc <= made[len(made)-1].Proc }}, true)
}

// factoryLoop materializes the procs of the schedd's factories that have
// room, every factoryInterval and when a job stops running, until the
// schedd stops.
func (s *Schedd) factoryLoop(ctx context.Context) {
	defer s.wg.Done()
	t := time.NewTicker(factoryInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.done.Done():
			return
		case <-t.C:
		case <-s.fac.kick:
		}
		s.materializeAll(ctx)
	}
}

// materializeAll gives each running factory the procs it has room for.
func (s *Schedd) materializeAll(ctx context.Context) {
	fs, err := s.q.Factories(ctx)
	if err != nil {
		s.log.Warn("reading job factories", "err", err)
		return
	}
	live := make(map[int]bool, len(fs))
	for _, f := range fs {
		live[f.Cluster] = true
		if f.Paused != jobqueue.FactoryRunning {
			continue
		}
		err := s.materialize(ctx, f)
		var fe *factoryError
		switch {
		case err == nil || ctx.Err() != nil:
		case errors.As(err, &fe):
			s.log.Warn("job factory paused: condor release of the cluster resumes it", "cluster", f.Cluster, "err", err)
			if _, perr := s.q.PauseFactory(ctx, f.Cluster, jobqueue.FactoryError); perr != nil {
				s.log.Warn("pausing job factory", "cluster", f.Cluster, "err", perr)
			}
		default:
			s.log.Warn("materializing jobs: trying again", "cluster", f.Cluster, "err", err)
		}
	}
	s.fac.mu.Lock()
	for c := range s.fac.m {
		if !live[c] {
			delete(s.fac.m, c)
		}
	}
	s.fac.mu.Unlock()
}

// materialize makes the procs factory f has room for now.
func (s *Schedd) materialize(ctx context.Context, f jobqueue.Factory) error {
	fa, err := s.factory(ctx, f)
	if err != nil {
		return err
	}
	s.submitLim.mu.Lock()
	room, err := s.queueRoom(ctx, f.Owner)
	var made []jobqueue.JobID
	if err == nil && room > 0 {
		made, err = s.q.Materialize(ctx, f.Cluster, room, procBuilder(fa))
	}
	s.submitLim.mu.Unlock()
	if errors.Is(err, jobqueue.ErrFactoryDone) {
		return nil
	}
	if err != nil {
		return err
	}
	if len(made) > 0 {
		s.log.Debug("materialized jobs", "cluster", f.Cluster, "first", made[0].Proc, "jobs", len(made))
	}
	return s.announce(ctx, f.Cluster, made)
}

// factory returns the cached factory of f, remade from its digest when
// not cached.
func (s *Schedd) factory(ctx context.Context, f jobqueue.Factory) (*submit.Factory, error) {
	s.fac.mu.Lock()
	fa := s.fac.m[f.Cluster]
	s.fac.mu.Unlock()
	if fa != nil {
		return fa, nil
	}
	d, err := s.q.FactoryDigest(ctx, f.Cluster)
	if err != nil {
		return nil, err
	}
	fa, err = submit.FactoryFromDigest(ctx, d, func(o *submit.Options) {
		o.ClusterID, o.Owner, o.ScheddName, o.UIDDomain = f.Cluster, f.Owner, s.opts.Name, s.uid
	})
	if err != nil {
		return nil, &factoryError{fmt.Errorf("remaking the job factory of cluster %d: %w", f.Cluster, err)}
	}
	if fa.Total() != f.Total {
		return nil, &factoryError{fmt.Errorf("the job factory of cluster %d remade makes %d jobs, not %d", f.Cluster, fa.Total(), f.Total)}
	}
	s.fac.mu.Lock()
	s.fac.m[f.Cluster] = fa
	s.fac.mu.Unlock()
	return fa, nil
}

// factoryAct removes (condor rm), pauses (condor hold) or resumes
// (condor release) the factories of the clusters or owners req names
// without a constraint, those of the caller alone unless an
// administrator asks, as HTCondor's schedd does for a cluster id. It
// returns the clusters whose factory changed.
func (s *Schedd) factoryAct(ctx context.Context, req *wire.ActRequest, sels []jobqueue.Selector) ([]string, error) {
	if req.Action != wire.ActRemove && req.Action != wire.ActHold && req.Action != wire.ActRelease {
		return nil, nil
	}
	fs, err := s.q.Factories(ctx)
	if err != nil || len(fs) == 0 {
		return nil, err
	}
	who := callerOf(ctx)
	var changed []string
	for _, f := range fs {
		hit := false
		for _, sel := range sels {
			if sel.Constraint != nil || sel.HasProc {
				continue
			}
			if sel.All || sel.Cluster == f.Cluster || (sel.Owner != "" && sel.Owner == f.Owner) {
				hit = true
			}
		}
		if !hit || (!who.admin && who.name != f.Owner) {
			continue
		}
		var ok bool
		switch req.Action {
		case wire.ActRemove:
			ok, err = s.q.RemoveFactory(ctx, f.Cluster)
		case wire.ActHold:
			ok, err = s.q.PauseFactory(ctx, f.Cluster, jobqueue.FactoryHeld)
		case wire.ActRelease:
			ok, err = s.q.PauseFactory(ctx, f.Cluster, jobqueue.FactoryRunning)
		}
		if err != nil {
			return changed, err
		}
		if ok {
			changed = append(changed, strconv.Itoa(f.Cluster))
			s.log.Info("job factory "+string(req.Action), "cluster", f.Cluster)
		}
	}
	if req.Action == wire.ActRelease {
		s.kickFactories()
	}
	return changed, nil
}
