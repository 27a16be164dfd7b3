package schedd

import (
	"context"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/jobqueue"
	"github.com/pond-htc/pond/condor/wire"
)

// jobPrio is a job's JobPrio (submit's priority), 0 when it has none or
// it does not evaluate to a number.
func jobPrio(ad *classad.Ad) int {
	p := ad.EvalNumber("JobPrio", nil, 0)
	if math.IsNaN(p) || p > math.MaxInt32 || p < math.MinInt32 {
		return 0
	}
	return int(p)
}

// prioQueue holds the ids of an autocluster's idle jobs in the order
// HTCondor's schedd starts a user's jobs: JobPrio descending, then
// submission (id) order. Each JobPrio has its own bucket of ids, kept
// ascending, so that filing a job is an append (ids grow) or a binary
// search, however many jobs wait; the distinct JobPrios are few. Ids
// left by jobs gone or re-filed under another JobPrio stay until skipped
// and compacted lazily, as the caller's valid says.
type prioQueue struct {
	prios  []int // descending; a bucket may be empty until compacted
	bucket map[int][]jobqueue.JobID
}

// prioKey is a place in a prioQueue; ok is false for none.
type prioKey struct {
	prio int
	id   jobqueue.JobID
	ok   bool
}

// before reports whether k starts before o: higher JobPrio, then lower id.
func (k prioKey) before(o prioKey) bool {
	if k.prio != o.prio {
		return k.prio > o.prio
	}
	return less(k.id, o.id)
}

func (q *prioQueue) push(prio int, id jobqueue.JobID) {
	if q.bucket == nil {
		q.bucket = map[int][]jobqueue.JobID{}
	}
	b, ok := q.bucket[prio]
	if !ok {
		i := sort.Search(len(q.prios), func(i int) bool { return q.prios[i] <= prio })
		q.prios = append(q.prios, 0)
		copy(q.prios[i+1:], q.prios[i:])
		q.prios[i] = prio
	}
	q.bucket[prio] = insert(b, id)
}

// first is the first id of the queue, stale or not; compact first.
func (q *prioQueue) first() prioKey {
	for _, p := range q.prios {
		if b := q.bucket[p]; len(b) > 0 {
			return prioKey{prio: p, id: b[0], ok: true}
		}
	}
	return prioKey{}
}

// each calls f on the ids in order, stale ones too, until f returns false.
func (q *prioQueue) each(f func(int, jobqueue.JobID) bool) {
	for _, p := range q.prios {
		for _, id := range q.bucket[p] {
			if !f(p, id) {
				return
			}
		}
	}
}

// compact drops the stale ids at the head of the queue and, in a bucket
// grown past twice the n live jobs, every stale id; then the buckets left
// empty.
func (q *prioQueue) compact(n int, valid func(int, jobqueue.JobID) bool) {
	for len(q.prios) > 0 {
		p := q.prios[0]
		b := q.bucket[p]
		for len(b) > 0 && !valid(p, b[0]) {
			b = b[1:]
		}
		if len(b) > 0 {
			q.bucket[p] = b
			break
		}
		delete(q.bucket, p)
		q.prios = q.prios[1:]
	}
	prios := q.prios[:0]
	for _, p := range q.prios {
		b := q.bucket[p]
		if len(b) > 2*n+1024 {
			kept := b[:0]
			for _, id := range b {
				if valid(p, id) {
					kept = append(kept, id)
				}
			}
			b = kept
			q.bucket[p] = b
		}
		if len(b) == 0 {
			delete(q.bucket, p)
			continue
		}
		prios = append(prios, p)
	}
	q.prios = prios
}

// refileIdle files again the idle jobs among those edits changed (a
// condor_qedit or condor_prio), keeping since when each waits, so that a
// new JobPrio, or an attribute that moves the job to another
// autocluster, takes effect at the next start. A job whose edit sets
// only JobPrio to a number, when no autocluster is told apart by
// JobPrio, is re-filed from the edit itself, without reading its ad: a
// condor_prio across a queue of many idle jobs costs no queue read.
func (s *Schedd) refileIdle(ctx context.Context, edits map[jobqueue.JobID]wire.Ad) {
	var read []jobqueue.JobID
	s.mu.Lock()
	for id, attrs := range edits {
		cur := s.idle.get(id)
		if cur == nil {
			continue
		}
		prio, ok := prioOnly(attrs)
		if !ok || s.idle.sig["jobprio"] {
			read = append(read, id)
			continue
		}
		if _, busy := s.active[id]; !busy && cur.prio != prio {
			ij := *cur
			ij.prio = prio
			s.idle.put(id, &ij)
		}
	}
	s.mu.Unlock()
	// The jobs to read, a batch at a time in a few queries each (an
	// edit of a cluster of many idle jobs).
	for len(read) > 0 {
		n := min(len(read), jobqueue.ActBatch)
		jobs, err := s.q.JobsOf(ctx, read[:n])
		if err != nil {
			s.log.Warn("reading edited idle jobs to file them again", "jobs", n, "err", err)
		}
		for _, id := range read[:n] {
			j, ok := jobs[id]
			if !ok || j.Status != jobqueue.Idle {
				continue
			}
			ja, err := s.parseJob(j)
			if err != nil {
				continue
			}
			s.mu.Lock()
			if cur := s.idle.get(id); cur != nil {
				if _, busy := s.active[id]; !busy {
					s.idle.put(id, s.idleEntry(j.Owner, cur.since, ja))
				}
			}
			s.mu.Unlock()
		}
		read = read[n:]
	}
}

// prioOnly returns the JobPrio an edit sets, when it sets JobPrio to an
// integer and nothing else.
func prioOnly(attrs wire.Ad) (int, bool) {
	if len(attrs) != 1 {
		return 0, false
	}
	for name, v := range attrs {
		if !strings.EqualFold(name, "JobPrio") {
			return 0, false
		}
		p, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
		if err != nil {
			return 0, false
		}
		return int(p), true
	}
	return 0, false
}
