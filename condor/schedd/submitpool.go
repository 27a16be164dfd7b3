package schedd

import (
	"strings"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/jobqueue"
	"github.com/pond-htc/pond/condor/wire"
)

// AttrSubmitPool is the job attribute naming the pool of the schedd that
// sent the job's ad. The schedd sets it on every job ad it sends out (to
// a negotiator, its own pool's or one it flocks to, and to a startd with
// a claim or a job to run), so that the startds of a pool the job flocked
// to can tell it from their own pool's jobs, which their RANK prefers
// (docs/flocks.md, "Lenders first"). The queue does not keep it, and a
// value the job's submitter set is replaced.
const AttrSubmitPool = "PondSubmitPool"

// KnobPool is the configuration knob naming the node's pool (the agent's
// -pool); empty or unset on a node of no pool.
const KnobPool = "POND_POOL"

// submitPool is the pool the schedd's node belongs to, "" for none.
func (s *Schedd) submitPool() string {
	v, _ := s.opts.Config.Get(KnobPool)
	return strings.TrimSpace(v)
}

// stampSubmitPool sets AttrSubmitPool on a job's ad to pool, or removes
// it when pool is "" (a schedd of no pool speaks for none), whatever the
// case of a name the submitter gave it. The wire form is copied: the
// queue's ad is not changed.
func stampSubmitPool(ja *ownAd, pool string) {
	n, exact := 0, false
	for k, v := range ja.w {
		if strings.EqualFold(k, AttrSubmitPool) {
			n++
			exact = k == AttrSubmitPool && pool != "" && v == classad.QuoteString(pool)
		}
	}
	if n == 0 && pool == "" || n == 1 && exact {
		return // as it should be: a job stamped already
	}
	w := make(wire.Ad, len(ja.w)+1)
	for k, v := range ja.w {
		if !strings.EqualFold(k, AttrSubmitPool) {
			w[k] = v
		}
	}
	ja.ad.Delete(AttrSubmitPool)
	if pool != "" {
		w[AttrSubmitPool] = classad.QuoteString(pool)
		ja.ad.SetString(AttrSubmitPool, pool)
	}
	ja.w = w
}

// parseOwnJob is parseJob with the schedd's pool stamped on the ad.
func (s *Schedd) parseOwnJob(j jobqueue.Job) (*ownAd, error) {
	ja, err := s.parseJob(j)
	if err != nil {
		return nil, err
	}
	stampSubmitPool(ja, s.submitPool())
	return ja, nil
}
