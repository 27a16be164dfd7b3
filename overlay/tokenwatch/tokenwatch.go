// Package tokenwatch follows the token a node presents to other agents and
// daemons: it warns the operator before the token expires and describes it
// for the node's API, never showing the token itself.
package tokenwatch

import (
	"context"
	"log/slog"
	"time"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/overlay/api"
)

// CheckInterval is how often an agent looks at its token's expiry.
const CheckInterval = time.Minute

// tokenWarnMargin is the most time before its expiry at which the agent
// warns that its token runs out; a token warns at a tenth of its lifetime
// before, if that is sooner.
const tokenWarnMargin = 24 * time.Hour

// tokenRefresh says how to give a node a new token (docs/security.md,
// "Rotating secrets").
const tokenRefresh = "write a new token over the token file (to a temporary file renamed over it; " +
	"pondctl apply renews a local node's in the week before it expires), then revoke the old one: see docs/security.md, Rotating secrets"

// Watch tells the operator, once for each token the token file holds,
// that the token is about to expire (a tenth of its lifetime or a day
// before, whichever is sooner) and that it has expired; it never logs the
// token itself.
type Watch struct {
	Path  string        // the token file
	Token func() string // its token, read again when the file changes
	Now   func() time.Time
	Log   *slog.Logger
	// End is when the node, a glidein, must be gone; zero for a node
	// without an end.
	End time.Time
	// Alarmed says the credential alarms (Alarms) warn as the token nears
	// its expiry: the watch then says only that it expired.
	Alarmed bool

	id                       string // the token last looked at
	warned, expired, endSaid bool   // what was said of it
	unreadableLogged         bool
}

// Check looks at the token once.
func (w *Watch) Check() {
	c, err := auth.ReadClaims(w.Token())
	if err != nil {
		if !w.unreadableLogged {
			w.unreadableLogged = true
			w.Log.Warn("the node's token cannot be read: other agents and daemons will refuse it; "+tokenRefresh, "file", w.Path, "err", err)
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
	left := c.Expires.Sub(w.Now())
	margin := min(c.Expires.Sub(c.IssuedAt)/10, tokenWarnMargin)
	attrs := []any{"file", w.Path, "subject", c.Subject, "id", c.ID, "expires", c.Expires.UTC().Format(time.RFC3339)}
	if !w.End.IsZero() && c.Expires.Before(w.End) && left > 0 && !w.endSaid {
		w.endSaid = true
		w.Log.Warn("the glidein's token expires before the glidein ends (at "+w.End.UTC().Format(time.RFC3339)+
			"): unless a new token is written over the token file before then, the glidein loses its pool when it expires", attrs...)
	}
	switch {
	case left <= 0 && !w.expired:
		w.expired, w.warned = true, true
		w.Log.Error("the node's token has expired: other agents and daemons refuse it; "+tokenRefresh, attrs...)
	case left > 0 && left <= margin && !w.warned && !w.Alarmed:
		w.warned = true
		w.Log.Warn("the node's token expires in "+left.Round(time.Second).String()+"; "+tokenRefresh, attrs...)
	}
}

// Run checks the token now and every interval until ctx ends.
func (w *Watch) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		w.Check()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Info describes the token read from the token file at path, for GET
// /v1/self: whom it names and when it expires, never the token. Nil
// without a token file.
func Info(path string, token func() string) *api.TokenInfo {
	if path == "" {
		return nil
	}
	c, err := auth.ReadClaims(token())
	if err != nil {
		return &api.TokenInfo{File: path, Error: "the token cannot be read"}
	}
	return &api.TokenInfo{File: path, Subject: c.Subject, ID: c.ID, Expires: c.Expires.UTC()}
}
