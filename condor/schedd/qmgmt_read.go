package schedd

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/pond-htc/pond/condor/jobqueue"
	"github.com/pond-htc/pond/condor/wire"
)

// read answers the queue-management reads (GetJobAd, GetJobByConstraint,
// GetNextJob, GetNextJobByConstraint, GetAllJobsByConstraint,
// GetAttributeInt, GetAttributeString, GetAttributeExpr), which any
// identity that may open the session may send, as condor_q may read
// every job. It reports whether r was one of them.
func (m *qmgmt) read(ctx context.Context, r *qRequest) (bool, error) {
	switch r.num {
	case qGetJobAd:
		if r.proc < 0 {
			return true, m.reply(-1, refuse(eNOENT, "cluster ad of %d: this schedd keeps no cluster ads apart from their jobs", r.cluster))
		}
		j, err := m.job(ctx, jobqueue.JobID{Cluster: r.cluster, Proc: r.proc})
		return true, m.replyAd(j, err)

	case qGetJobByConstraint:
		ids, err := m.matching(ctx, r.constraint)
		if err == nil && len(ids) == 0 {
			err = refuse(eNOENT, "no job matches %q", r.constraint)
		}
		var j *jobqueue.Job
		if err == nil {
			j, err = m.job(ctx, ids[0])
		}
		return true, m.replyAd(j, err)

	case qGetNextJob, qGetNextJobByConstraint:
		if r.arg != 0 {
			constraint := r.constraint
			if r.num == qGetNextJob {
				constraint = ""
			}
			ids, err := m.matching(ctx, constraint)
			if err != nil {
				m.scan = nil
				return true, m.replyAd(nil, err)
			}
			m.scan = ids
		}
		// A job gone since the scan began is passed over.
		for len(m.scan) > 0 {
			id := m.scan[0]
			m.scan = m.scan[1:]
			j, err := m.job(ctx, id)
			if err == nil {
				return true, m.replyAd(j, nil)
			}
			var q *qError
			if !errors.As(err, &q) || q.errno != eNOENT {
				return true, m.replyAd(nil, err)
			}
		}
		return true, m.replyAd(nil, refuse(eNOENT, "no more jobs"))

	case qGetAllJobsByConstraint:
		return true, m.allJobs(ctx, r.constraint, r.value)

	case qGetAttributeInt, qGetAttributeString, qGetAttributeExpr:
		j, err := m.job(ctx, jobqueue.JobID{Cluster: r.cluster, Proc: r.proc})
		if err != nil {
			return true, m.reply(-1, err)
		}
		text, ok := lookupFold(j.Ad, r.name)
		if !ok {
			return true, m.reply(-1, refuse(eNOENT, "job %s has no attribute %s", j.ID, r.name))
		}
		ad, err := wire.ToClassAd(wire.Ad{r.name: text})
		if err != nil {
			return true, m.reply(-1, refuse(eINVAL, "attribute %s of job %s: %v", r.name, j.ID, err))
		}
		switch r.num {
		case qGetAttributeInt:
			v, ok := ad.EvalAttr(r.name).IntValue()
			if !ok {
				return true, m.reply(-1, refuse(eINVAL, "attribute %s of job %s is not an integer", r.name, j.ID))
			}
			if err := m.st.PutInt(0); err != nil {
				return true, err
			}
			if err := m.st.PutInt(v); err != nil {
				return true, err
			}
		case qGetAttributeString:
			v, ok := ad.EvalAttr(r.name).StringValue()
			if !ok {
				return true, m.reply(-1, refuse(eINVAL, "attribute %s of job %s is not a string", r.name, j.ID))
			}
			if err := m.st.PutInt(0); err != nil {
				return true, err
			}
			if err := m.st.PutString(v); err != nil {
				return true, err
			}
		default:
			e, _ := ad.OldExpr(r.name)
			if err := m.st.PutInt(0); err != nil {
				return true, err
			}
			if err := m.st.PutString(e); err != nil {
				return true, err
			}
		}
		return true, m.st.EndMessage()
	}
	return false, nil
}

func lookupFold(ad jobqueue.Ad, name string) (string, bool) {
	if v, ok := ad[name]; ok {
		return v, true
	}
	for k, v := range ad {
		if strings.EqualFold(k, name) {
			return v, true
		}
	}
	return "", false
}

// job reads one queued job.
func (m *qmgmt) job(ctx context.Context, id jobqueue.JobID) (*jobqueue.Job, error) {
	j, err := m.s.q.Get(ctx, id)
	if errors.Is(err, jobqueue.ErrNotFound) {
		return nil, refuse(eNOENT, "job %s is not in the queue", id)
	}
	if err != nil {
		return nil, err
	}
	return &j, nil
}

// matching returns the ids of the queued jobs a constraint selects ("":
// every job), in the queue's order.
func (m *qmgmt) matching(ctx context.Context, constraint string) ([]jobqueue.JobID, error) {
	sels, err := selectors(nil, constraint)
	if err != nil {
		return nil, refuse(eINVAL, "constraint %q: %v", constraint, err)
	}
	jobs, err := m.s.q.Query(ctx, sels[0], []string{"ClusterId"})
	if err != nil {
		return nil, err
	}
	ids := make([]jobqueue.JobID, len(jobs))
	for i, j := range jobs {
		ids[i] = j.ID
	}
	return ids, nil
}

// replyAd answers a read of one job: 0 and its ad, or -1 and the errno.
func (m *qmgmt) replyAd(j *jobqueue.Job, err error) error {
	if err != nil {
		return m.reply(-1, err)
	}
	if err := m.st.PutInt(0); err != nil {
		return err
	}
	if err := m.st.PutAttrs(j.Ad, nil); err != nil {
		return fmt.Errorf("job %s: %w", j.ID, err)
	}
	return m.st.EndMessage()
}

// allJobs answers GetAllJobsByConstraint: in one message, 0 and the ad
// (projected onto projection, names separated by newlines; none for
// every attribute) of each job constraint selects, then -1 and ENOENT.
func (m *qmgmt) allJobs(ctx context.Context, constraint, projection string) error {
	sels, err := selectors(nil, constraint)
	if err != nil {
		return m.reply(-1, refuse(eINVAL, "constraint %q: %v", constraint, err))
	}
	jobs, err := m.s.q.Query(ctx, sels[0], nil)
	if err != nil {
		return m.reply(-1, err)
	}
	proj := strings.FieldsFunc(projection, func(r rune) bool { return r == '\n' || r == ',' || r == ' ' || r == '\t' })
	for _, j := range jobs {
		if err := m.st.PutInt(0); err != nil {
			return err
		}
		if err := m.st.PutAttrs(j.Ad, proj); err != nil {
			return fmt.Errorf("job %s: %w", j.ID, err)
		}
	}
	return m.reply(-1, refuse(eNOENT, "no more jobs"))
}
