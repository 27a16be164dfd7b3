package agent

import (
	"context"
	"log/slog"
	"time"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/overlay/api"
)

// tokenCheckInterval is how often the agent looks at its token's expiry.
const tokenCheckInterval = time.Minute

// tokenWarnMargin is the most time before its expiry at which the agent
// warns that its token runs out; a token warns at a tenth of its lifetime
// before, if that is sooner.
const tokenWarnMargin = 24 * time.Hour

// tokenRefresh says how to give a node a new token (docs/security.md,
// "Rotating secrets").
const tokenRefresh = "write a new token over the token file (to a temporary file renamed over it; " +
	"pondctl apply -replace=pool.NAME renews a local node's), then revoke the old one: see docs/security.md, Rotating secrets"

// tokenWatch tells the operator, once for each token the token file holds,
// that the token is about to expire (a tenth of its lifetime or a day
// before, whichever is sooner) and that it has expired; it never logs the
// token itself.
type tokenWatch struct {
	path  string        // the token file
	token func() string // its token, read again when the file changes
	now   func() time.Time
	log   *slog.Logger
	// end is when the node, a glidein, must be gone; zero for a node
	// without an end.
	end time.Time

	id                       string // the token last looked at
	warned, expired, endSaid bool   // what was said of it
	unreadableLogged         bool
}

// check looks at the token once.
func (w *tokenWatch) check() {
	c, err := auth.ReadClaims(w.token())
	if err != nil {
		if !w.unreadableLogged {
			w.unreadableLogged = true
			w.log.Warn("the node's token cannot be read: other agents and daemons will refuse it; "+tokenRefresh, "file", w.path, "err", err)
		}
		return
	}
	w.unreadableLogged = false
	if c.ID != w.id {
		w.id, w.warned, w.expired, w.endSaid = c.ID, false, false, false
	}
	if c.Expires.IsZero() {
		return
	}
	left := c.Expires.Sub(w.now())
	margin := min(c.Expires.Sub(c.IssuedAt)/10, tokenWarnMargin)
	attrs := []any{"file", w.path, "subject", c.Subject, "id", c.ID, "expires", c.Expires.UTC().Format(time.RFC3339)}
	if !w.end.IsZero() && c.Expires.Before(w.end) && left > 0 && !w.endSaid {
		w.endSaid = true
		w.log.Warn("the glidein's token expires before the glidein ends (at "+w.end.UTC().Format(time.RFC3339)+
			"): unless a new token is written over the token file before then, the glidein loses its pool when it expires", attrs...)
	}
	switch {
	case left <= 0 && !w.expired:
		w.expired, w.warned = true, true
		w.log.Error("the node's token has expired: other agents and daemons refuse it; "+tokenRefresh, attrs...)
	case left > 0 && left <= margin && !w.warned:
		w.warned = true
		w.log.Warn("the node's token expires in "+left.Round(time.Second).String()+"; "+tokenRefresh, attrs...)
	}
}

// run checks the token now and every interval until ctx ends.
func (w *tokenWatch) run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		w.check()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// watchToken warns before the node's token expires, while the services
// run; without a token file it returns at once.
func (a *Agent) watchToken() {
	if a.cfg.TokenFile == "" {
		return
	}
	w := &tokenWatch{path: a.cfg.TokenFile, token: a.token, now: time.Now, log: a.logger}
	if a.glidein != nil {
		w.end = a.glidein.Status().EndTime
	}
	w.run(a.ctx, tokenCheckInterval)
}

// tokenInfo describes the token the agent presents, for GET /v1/self:
// whom it names and when it expires, never the token. Nil without a token
// file.
func (a *Agent) tokenInfo() *api.TokenInfo {
	if a.cfg.TokenFile == "" {
		return nil
	}
	c, err := auth.ReadClaims(a.token())
	if err != nil {
		return &api.TokenInfo{File: a.cfg.TokenFile, Error: "the token cannot be read"}
	}
	return &api.TokenInfo{File: a.cfg.TokenFile, Subject: c.Subject, ID: c.ID, Expires: c.Expires.UTC()}
}
