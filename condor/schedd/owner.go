package schedd

import (
	"context"
	"errors"
	"fmt"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/jobqueue"
	"github.com/pond-htc/pond/condor/wire"
)

// caller is who sent a request, as the daemons' handler authenticated it:
// the token's subject, and whether it may act on every user's jobs
// (ADMINISTRATOR). In an open pool (no claims) the caller is anonymous and
// trusted as HTCondor's CLAIMTOBE: it names the Owner itself.
type caller struct {
	name  string // the token's subject; "" in an open pool
	admin bool   // may submit as, and act on the jobs of, anyone
}

func callerOf(ctx context.Context) caller {
	c, ok := auth.FromContext(ctx)
	if !ok {
		return caller{admin: true}
	}
	return caller{name: c.Subject, admin: c.Allows(auth.Administrator)}
}

// ownJob sets the Owner (and User) of job proc of a submit to cluster
// from the caller's identity, as HTCondor's schedd does: a job without
// an Owner gets the caller's, one that names the caller keeps it, and
// one that names another user is refused (ErrForbidden) unless the
// caller is an administrator, who may queue jobs for others. In an open
// pool the jobs must name their Owner.
func (s *Schedd) ownJob(who caller, cluster, proc int, j wire.Ad) error {
	text, ok := j["Owner"]
	if !ok {
		if who.name == "" {
			return fmt.Errorf("%w: job %d.%d has no Owner", wire.ErrBadRequest, cluster, proc)
		}
		s.setOwner(j, who.name)
		return nil
	}
	owner, err := classad.UnquoteString(text)
	if err != nil || owner == "" {
		return fmt.Errorf("%w: job %d.%d: Owner %s is not a user name", wire.ErrBadRequest, cluster, proc, text)
	}
	if owner != who.name && !who.admin {
		return fmt.Errorf("%w: job %d.%d names Owner %q but the caller is %q; only an administrator submits for others",
			wire.ErrForbidden, cluster, proc, owner, who.name)
	}
	if owner == who.name {
		s.setOwner(j, owner)
	}
	return nil
}

// setOwner gives a job ad its Owner and the User that goes with it.
func (s *Schedd) setOwner(j wire.Ad, owner string) {
	j["Owner"] = classad.QuoteString(owner)
	j["User"] = classad.QuoteString(owner + "@" + s.uid)
}

// restrict narrows the selectors of condor_rm, condor_hold or
// condor_release to the caller's own jobs unless it is an administrator.
// A selector that names jobs (a cluster or a job id) of which one belongs
// to someone else is refused with ErrForbidden, as HTCondor answers
// "permission denied"; one that selects by constraint, owner or "all"
// quietly leaves the others' jobs alone.
func (s *Schedd) restrict(ctx context.Context, sels []jobqueue.Selector) ([]jobqueue.Selector, error) {
	who := callerOf(ctx)
	if who.admin {
		return sels, nil
	}
	out := make([]jobqueue.Selector, len(sels))
	for i, sel := range sels {
		if !sel.All && sel.Owner == "" {
			// The owners only, a page at a time: a cluster of
			// 100,000 jobs costs no ads.
			err := s.q.Scan(ctx, sel, []string{}, func(j jobqueue.Job) error {
				if j.Owner != who.name {
					return fmt.Errorf("%w: job %s belongs to %q, not to %q", wire.ErrForbidden, j.ID, j.Owner, who.name)
				}
				return nil
			})
			if errors.Is(err, wire.ErrForbidden) {
				return nil, err
			}
			if err != nil {
				return nil, fmt.Errorf("reading the selected jobs: %w", err)
			}
		}
		switch sel.Owner {
		case "", who.name:
			// In the database, through its owner index.
			sel.Owner = who.name
		default:
			// Another user's jobs: left alone.
			sel.Constraint = func(jobqueue.Job) bool { return false }
		}
		out[i] = sel
	}
	return out, nil
}
