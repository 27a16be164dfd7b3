package schedd

import (
	"context"
	"sort"
	"time"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/jobqueue"
	"github.com/pond-htc/pond/condor/wire"
)

// idleJob is an idle job's ad, parsed and on the wire.
type idleJob struct {
	owner string
	ad    *classad.Ad
	w     wire.Ad
	// since is when the job became idle here (the schedd's start for a
	// job idle then): it may flock once idle for FLOCK_IDLE_TIME.
	since time.Time
}

func newIdleJob(j jobqueue.Job, now time.Time) (*idleJob, error) {
	ad, err := wire.ToClassAd(j.Ad)
	if err != nil {
		return nil, err
	}
	return &idleJob{owner: j.Owner, ad: ad, w: j.Ad, since: now}, nil
}

// addIdle puts a job that is idle in the queue among the jobs to match,
// and asks for a negotiation cycle.
func (s *Schedd) addIdle(ctx context.Context, id jobqueue.JobID) {
	j, err := s.q.Get(ctx, id)
	if err != nil || j.Status != jobqueue.Idle {
		return
	}
	ij, err := newIdleJob(j, s.now())
	if err != nil {
		return
	}
	s.mu.Lock()
	if _, busy := s.active[id]; !busy {
		s.idle.put(id, ij)
	}
	s.mu.Unlock()
	s.markDirty()
	s.reschedule()
}

// Idle answers the negotiator: idle jobs not being started. The
// negotiator of a pool the schedd flocks to gets only the jobs that may
// flock there (idle long enough, passing the flock's job requirements,
// within its max_jobs); one of a pool it no longer flocks to gets none.
func (s *Schedd) Idle(ctx context.Context, req *wire.IdleRequest) (*wire.IdleResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := &wire.IdleResponse{Jobs: []wire.Job{}}
	t, flocked, refused := s.flockPeer(ctx)
	if refused {
		return out, nil
	}
	if !flocked {
		// The pool's own negotiator: what it leaves idle may flock.
		s.fl.homeCycle = s.now()
	}
	room := -1
	var idle time.Duration
	now := s.now()
	if flocked {
		idle, _ = s.flockParams()
		room = s.roomIn(t)
	}
	s.idle.each(func(id jobqueue.JobID, ij *idleJob) bool {
		if room >= 0 && len(out.Jobs) >= room {
			return false
		}
		if flocked && !s.jobFlocks(ij, t, now, idle) {
			return true
		}
		if req.Owner == "" || ij.owner == req.Owner {
			out.Jobs = append(out.Jobs, wire.Job{ID: id.String(), Ad: ij.w})
		}
		return true
	})
	return out, nil
}

func less(a, b jobqueue.JobID) bool {
	if a.Cluster != b.Cluster {
		return a.Cluster < b.Cluster
	}
	return a.Proc < b.Proc
}

// idleSet holds idle jobs in job id order. Deletions leave stale ids in
// order, skipped and compacted lazily, so that the common operations (take
// the first job, delete it) are cheap with many idle jobs.
type idleSet struct {
	m     map[jobqueue.JobID]*idleJob
	order []jobqueue.JobID // ascending; may hold ids no longer in m
}

func newIdleSet() *idleSet { return &idleSet{m: map[jobqueue.JobID]*idleJob{}} }

func (s *idleSet) len() int { return len(s.m) }

func (s *idleSet) get(id jobqueue.JobID) *idleJob { return s.m[id] }

func (s *idleSet) put(id jobqueue.JobID, ij *idleJob) {
	s.m[id] = ij
	n := len(s.order)
	if n == 0 || less(s.order[n-1], id) {
		s.order = append(s.order, id)
		return
	}
	i := sort.Search(n, func(i int) bool { return !less(s.order[i], id) })
	if i < n && s.order[i] == id {
		return
	}
	s.order = append(s.order, jobqueue.JobID{})
	copy(s.order[i+1:], s.order[i:])
	s.order[i] = id
}

func (s *idleSet) delete(id jobqueue.JobID) {
	delete(s.m, id)
	if len(s.order) > 2*len(s.m)+1024 {
		kept := s.order[:0]
		for _, x := range s.order {
			if _, ok := s.m[x]; ok {
				kept = append(kept, x)
			}
		}
		s.order = kept
	}
}

// each calls f for the idle jobs in id order until f returns false.
func (s *idleSet) each(f func(jobqueue.JobID, *idleJob) bool) {
	for len(s.order) > 0 {
		if _, ok := s.m[s.order[0]]; ok {
			break
		}
		s.order = s.order[1:]
	}
	for _, id := range s.order {
		if ij, ok := s.m[id]; ok && !f(id, ij) {
			return
		}
	}
}
