package api

import (
	"context"
	"crypto/tls"
	"sync"
	"time"
)

// inviteCheckTimeout bounds the question an inviter asks a node whose
// answer to an invitation was lost.
const inviteCheckTimeout = 10 * time.Second

// InviteOutcome is how one invitation of InviteAll ended.
type InviteOutcome struct {
	// Reply is the node's answer. When the answer was lost but the node
	// could be asked afterwards, Reply says whether it joined.
	Reply Reply
	// Err is set when the node could not be asked at all; it was then
	// asked to leave the pond, in case it had joined.
	Err error
}

// Joined reports whether the node is a member of the pond.
func (o InviteOutcome) Joined() bool { return o.Err == nil && o.Reply.Accepted }

// InviteAll is the inviting side of pond membership: it sends inv to the
// agents whose APIs listen at addrs, in parallel, presenting token (none
// when empty) over the sea's TLS tlsCfg (plain HTTP when nil), and returns
// how each ended, in the order of addrs. An invitation whose answer is
// lost may still have been accepted: the node is asked, and counted if it
// joined; one that cannot be asked is released, so that it does not linger
// as a member nobody knows of.
func InviteAll(ctx context.Context, inv Invitation, addrs []string, token string, tlsCfg *tls.Config) []InviteOutcome {
	out := make([]InviteOutcome, len(addrs))
	var wg sync.WaitGroup
	for i, addr := range addrs {
		wg.Go(func() { out[i] = inviteOne(ctx, inv, NewClient(addr).WithTLS(tlsCfg).WithToken(token)) })
	}
	wg.Wait()
	return out
}

func inviteOne(ctx context.Context, inv Invitation, cl *Client) InviteOutcome {
	r, err := cl.Invite(ctx, inv)
	if err == nil {
		return InviteOutcome{Reply: r}
	}
	cctx, cancel := context.WithTimeout(ctx, inviteCheckTimeout)
	defer cancel()
	cur, cerr := cl.Membership(cctx)
	if cerr != nil {
		_, _ = cl.Release(cctx, inv.PondID, Drain{Mode: DrainEvict})
		return InviteOutcome{Err: err}
	}
	return InviteOutcome{Reply: Reply{Node: r.Node, Accepted: cur != nil && cur.PondID == inv.PondID, Reason: "did not answer the invitation"}}
}
