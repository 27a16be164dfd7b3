package member

import (
	"context"
	"crypto/tls"
	"sync"
	"time"

	"github.com/pond-htc/pond/overlay/api"
)

// checkTimeout bounds the question an inviter asks a node whose answer to
// an invitation was lost.
const checkTimeout = 10 * time.Second

// Outcome is how one invitation ended.
type Outcome struct {
	// Reply is the node's answer. When the answer was lost but the node
	// could be asked afterwards, Reply says whether it joined.
	Reply api.Reply
	// Err is set when the node could not be asked at all; it was then
	// asked to leave the pond, in case it had joined.
	Err error
}

// Joined reports whether the node is a member of the pond.
func (o Outcome) Joined() bool { return o.Err == nil && o.Reply.Accepted }

// InviteAll is the inviting side of pond membership: it sends inv to the
// agents whose APIs listen at addrs, in parallel, presenting token (none
// when empty) over the sea's TLS tlsCfg (plain HTTP when nil), and returns how each ended, in the order of addrs. An invitation whose answer is lost may
// still have been accepted: the node is asked, and counted if it joined;
// one that cannot be asked is released, so that it does not linger as a
// member nobody knows of.
func InviteAll(ctx context.Context, inv api.Invitation, addrs []string, token string, tlsCfg *tls.Config) []Outcome {
	out := make([]Outcome, len(addrs))
	var wg sync.WaitGroup
	for i, addr := range addrs {
		wg.Go(func() { out[i] = invite(ctx, inv, api.NewClient(addr).WithTLS(tlsCfg).WithToken(token)) })
	}
	wg.Wait()
	return out
}

func invite(ctx context.Context, inv api.Invitation, cl *api.Client) Outcome {
	r, err := cl.Invite(ctx, inv)
	if err == nil {
		return Outcome{Reply: r}
	}
	cctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	cur, cerr := cl.Membership(cctx)
	if cerr != nil {
		_, _ = cl.Release(cctx, inv.PondID, api.Drain{Mode: api.DrainEvict})
		return Outcome{Err: err}
	}
	return Outcome{Reply: api.Reply{Node: r.Node, Accepted: cur != nil && cur.PondID == inv.PondID, Reason: "did not answer the invitation"}}
}
