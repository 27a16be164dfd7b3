package schedd

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/jobqueue"
	"github.com/pond-htc/pond/condor/negotiator"
	"github.com/pond-htc/pond/condor/wire"
)

// idleJob is an idle job as the schedd keeps it while it waits: its owner,
// since when it waits and its autocluster. Its ad stays in the job queue,
// read again when the job starts, so that memory does not grow with the
// ads of the jobs waiting.
type idleJob struct {
	owner string
	// since is when the job became idle here (the schedd's start for a
	// job idle then): it may flock once idle for FLOCK_IDLE_TIME.
	since time.Time
	ac    *idleCluster
	// prio is the job's JobPrio: a user's jobs start higher first.
	prio int
}

// idleCluster is an autocluster of idle jobs: jobs of one owner equal in
// every significant attribute, which match the same slots. The ad of one
// of them stands for all in matchmaking.
type idleCluster struct {
	key   string
	owner string // the submitter: the jobs' accounting group, or user
	user  string // the jobs' Owner
	ad    *classad.Ad
	w     wire.Ad
	q     prioQueue // its jobs, JobPrio descending then id ascending
	n     int       // jobs in the cluster
}

// ownAd is a job's own ad, read from the queue when it starts.
type ownAd struct {
	ad *classad.Ad
	w  wire.Ad
}

// parseJob parses a job read from the queue, its attribute texts
// through the schedd's shared parser.
func (s *Schedd) parseJob(j jobqueue.Job) (*ownAd, error) {
	ad, err := s.jobs.ad(j.Ad)
	if err != nil {
		return nil, err
	}
	return &ownAd{ad: ad, w: j.Ad}, nil
}

// loadJob reads an idle job's ad from the queue.
func (s *Schedd) loadJob(ctx context.Context, id jobqueue.JobID) (*ownAd, error) {
	j, err := s.q.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if j.Status != jobqueue.Idle {
		return nil, fmt.Errorf("job %s is %s, not idle", id, j.Status)
	}
	return s.parseOwnJob(j)
}

// idleEntry makes the entry of an idle job with ad ja, filed under the
// submitter it counts for (acct.go); s.mu held.
func (s *Schedd) idleEntry(owner string, since time.Time, ja *ownAd) *idleJob {
	stampSubmitPool(ja, s.submitPool())
	if o, ok := ja.ad.EvalAttr("Owner").StringValue(); ok && o != "" {
		owner = o
	}
	user := owner
	owner = submitterOf(user, ja.ad)
	key := owner + "\x00" + negotiator.AutoclusterKey(ja.ad, s.idle.sig)
	ac := s.idle.clusters[key]
	if ac == nil {
		ac = &idleCluster{key: key, owner: owner, user: user, ad: ja.ad, w: ja.w}
	}
	return &idleJob{owner: owner, since: since, ac: ac, prio: jobPrio(ja.ad)}
}

// addIdle puts a job that is idle in the queue among the jobs to match,
// and asks for a negotiation cycle.
func (s *Schedd) addIdle(ctx context.Context, id jobqueue.JobID) {
	j, err := s.q.Get(ctx, id)
	if err != nil || j.Status != jobqueue.Idle {
		return
	}
	ja, err := s.parseJob(j)
	if err != nil {
		return
	}
	s.addIdleJob(ctx, j, ja)
}

// addIdleJob is addIdle of a job read already, ja its parsed ad.
func (s *Schedd) addIdleJob(ctx context.Context, j jobqueue.Job, ja *ownAd) {
	id := j.ID
	if j.Status != jobqueue.Idle || s.deferStart(ctx, id, ja.ad) {
		return
	}
	if isLocal(ja.ad) {
		s.startLocal(id)
		return
	}
	s.mu.Lock()
	if _, busy := s.active[id]; !busy {
		s.idle.put(id, s.idleEntry(j.Owner, s.now(), ja))
	}
	s.mu.Unlock()
	s.markDirty()
	s.reschedule()
}

// indexIdle (re)reads the idle jobs of the given clusters from the queue
// and files each under its autocluster, keeping when it became idle; with
// all, it files every idle job of the queue (at start). It reads one
// cluster at a time, so that only one cluster's ads are in memory.
func (s *Schedd) indexIdle(ctx context.Context, clusters []int) error {
	parse := adParser{}
	for _, c := range clusters {
		// A page of jobs at a time, each attribute text the cluster's jobs
		// share parsed once: a large cluster costs neither all its ads at
		// once nor a parse of each.
		err := s.q.Scan(ctx, jobqueue.Selector{Cluster: c,
			Constraint: func(j jobqueue.Job) bool { return j.Status == jobqueue.Idle }}, nil, func(j jobqueue.Job) error {
			ad, err := parse.ad(j.Ad)
			if err != nil {
				s.log.Warn("unparsable job ad", "job", j.ID, "err", err)
				return nil
			}
			ja := &ownAd{ad: ad, w: j.Ad}
			s.mu.Lock()
			_, busy := s.active[j.ID]
			s.mu.Unlock()
			if busy || s.deferStart(ctx, j.ID, ja.ad) {
				return nil
			}
			if isLocal(ja.ad) {
				s.startLocal(j.ID)
				return nil
			}
			s.mu.Lock()
			defer s.mu.Unlock()
			since := s.now()
			if old := s.idle.get(j.ID); old != nil {
				since = old.since
			}
			s.idle.put(j.ID, s.idleEntry(j.Owner, since, ja))
			return nil
		})
		if err != nil {
			return fmt.Errorf("reading the idle jobs of cluster %d: %w", c, err)
		}
	}
	return nil
}

// widen adds attributes to those the schedd's autoclusters keep apart and,
// when that changes them, files the idle jobs again. Attributes are only
// ever added: finer autoclusters stay right for every negotiator.
func (s *Schedd) widen(ctx context.Context, attrs []string) {
	s.regroup.Lock()
	defer s.regroup.Unlock()
	s.mu.Lock()
	grew := false
	for _, a := range attrs {
		if a != "" && !s.idle.sig[a] {
			s.idle.sig[a] = true
			grew = true
		}
	}
	if !grew {
		s.mu.Unlock()
		return
	}
	var clusters []int
	s.idle.each(func(id jobqueue.JobID, _ *idleJob) bool {
		if n := len(clusters); n == 0 || clusters[n-1] != id.Cluster {
			clusters = append(clusters, id.Cluster)
		}
		return true
	})
	s.mu.Unlock()
	if err := s.indexIdle(ctx, clusters); err != nil {
		s.log.Warn("filing idle jobs by their significant attributes", "err", err)
	}
}

// Idle answers the negotiator: idle jobs not being started, as
// autoclusters, each with at most req.Limit job ids. The negotiator of a
// pool the schedd flocks to gets only the jobs that may flock there (idle
// long enough, passing the flock's job requirements, within its max_jobs);
// one of a pool it no longer flocks to gets none.
func (s *Schedd) Idle(ctx context.Context, req *wire.IdleRequest) (*wire.IdleResponse, error) {
	// Every idle job of the queue, or none: the schedd's start files them.
	select {
	case <-s.idleLoaded:
	case <-ctx.Done():
		return nil, fmt.Errorf("the schedd is still reading the idle jobs of its queue: %w", ctx.Err())
	}
	if len(req.SignificantAttrs) > 0 {
		s.widen(ctx, req.SignificantAttrs)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := &wire.IdleResponse{Clusters: []wire.IdleCluster{}}
	t, flocked, refused := s.flockPeer(ctx, req.Negotiator)
	if refused {
		return out, nil
	}
	if !flocked && !req.Peek {
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
	acs := make([]*idleCluster, 0, len(s.idle.clusters))
	for _, ac := range s.idle.clusters {
		if req.Owner == "" || ac.owner == req.Owner {
			acs = append(acs, ac)
		}
	}
	for _, ac := range acs {
		s.idle.compact(ac)
	}
	sort.Slice(acs, func(i, j int) bool { return acs[i].q.first().before(acs[j].q.first()) })
	total := 0
	for _, ac := range acs {
		wc := wire.IdleCluster{Ad: ac.w, IDs: []string{}}
		if !flocked {
			// The pool's own negotiator: the first Limit jobs stand
			// for the cluster, which it cannot match more of in a cycle.
			s.idle.eachOf(ac, func(id jobqueue.JobID, _ *idleJob) bool {
				if req.Limit > 0 && len(wc.IDs) >= req.Limit {
					return false
				}
				wc.IDs = append(wc.IDs, id.String())
				return true
			})
			wc.Count = ac.n
		} else {
			s.idle.eachOf(ac, func(id jobqueue.JobID, ij *idleJob) bool {
				if room >= 0 && total >= room || req.Limit > 0 && len(wc.IDs) >= req.Limit {
					return false
				}
				if s.jobFlocks(ij, t, now, idle) {
					wc.IDs = append(wc.IDs, id.String())
					total++
				}
				return true
			})
			wc.Count = len(wc.IDs)
		}
		if len(wc.IDs) > 0 {
			out.Clusters = append(out.Clusters, wc)
		}
	}
	return out, nil
}

func less(a, b jobqueue.JobID) bool {
	if a.Cluster != b.Cluster {
		return a.Cluster < b.Cluster
	}
	return a.Proc < b.Proc
}

// idleSet holds idle jobs in job id order, filed in autoclusters.
// Deletions leave stale ids in order, skipped and compacted lazily, so that
// the common operations (take the first job, delete it) are cheap with
// many idle jobs.
type idleSet struct {
	m        map[jobqueue.JobID]*idleJob
	order    []jobqueue.JobID // ascending; may hold ids no longer in m
	clusters map[string]*idleCluster
	// sig are the attributes (lower-case) that the slots of the
	// negotiators asking, and the flocks' job requirements, refer to.
	sig map[string]bool
}

func newIdleSet() *idleSet {
	return &idleSet{m: map[jobqueue.JobID]*idleJob{}, clusters: map[string]*idleCluster{}, sig: map[string]bool{}}
}

func (s *idleSet) len() int { return len(s.m) }

func (s *idleSet) get(id jobqueue.JobID) *idleJob { return s.m[id] }

// insert puts id into ids, kept ascending.
func insert(ids []jobqueue.JobID, id jobqueue.JobID) []jobqueue.JobID {
	n := len(ids)
	if n == 0 || less(ids[n-1], id) {
		return append(ids, id)
	}
	i := sort.Search(n, func(i int) bool { return !less(ids[i], id) })
	if i < n && ids[i] == id {
		return ids
	}
	ids = append(ids, jobqueue.JobID{})
	copy(ids[i+1:], ids[i:])
	ids[i] = id
	return ids
}

func (s *idleSet) put(id jobqueue.JobID, ij *idleJob) {
	if old := s.m[id]; old != nil {
		s.leave(old)
	}
	ac := s.clusters[ij.ac.key]
	if ac == nil {
		ac = ij.ac
		s.clusters[ac.key] = ac
	}
	ij.ac = ac
	ac.n++
	ac.q.push(ij.prio, id)
	s.m[id] = ij
	s.order = insert(s.order, id)
}

// leave takes ij out of its autocluster, dropping the cluster once empty.
func (s *idleSet) leave(ij *idleJob) {
	ac := ij.ac
	ac.n--
	if ac.n <= 0 {
		if s.clusters[ac.key] == ac {
			delete(s.clusters, ac.key)
		}
		ac.q = prioQueue{}
	}
}

// compact drops the stale ids of ac.
func (s *idleSet) compact(ac *idleCluster) {
	ac.q.compact(ac.n, func(prio int, id jobqueue.JobID) bool {
		ij := s.m[id]
		return ij != nil && ij.ac == ac && ij.prio == prio
	})
}

// eachOf calls f for the idle jobs of ac in the order they start (JobPrio
// descending, then id) until f returns false.
func (s *idleSet) eachOf(ac *idleCluster, f func(jobqueue.JobID, *idleJob) bool) {
	ac.q.each(func(prio int, id jobqueue.JobID) bool {
		ij := s.m[id]
		if ij == nil || ij.ac != ac || ij.prio != prio {
			return true
		}
		return f(id, ij)
	})
}

func (s *idleSet) delete(id jobqueue.JobID) {
	ij := s.m[id]
	if ij == nil {
		return
	}
	delete(s.m, id)
	s.leave(ij)
	if ij.ac.n > 0 {
		s.compact(ij.ac)
	}
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

// firstFit returns the idle job to start first (JobPrio descending, then
// id) of the autoclusters ok accepts (given the cluster's first job);
// s.mu held.
func (s *idleSet) firstFit(ok func(*idleCluster, *idleJob) bool) (jobqueue.JobID, *idleJob) {
	var best prioKey
	var bestJ *idleJob
	for _, ac := range s.clusters {
		s.compact(ac)
		k := ac.q.first()
		if !k.ok || bestJ != nil && !k.before(best) || !ok(ac, s.m[k.id]) {
			continue
		}
		best, bestJ = k, s.m[k.id]
	}
	return best.id, bestJ
}
