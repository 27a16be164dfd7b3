package console

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/pond-htc/pond/condor/auth"
)

// Shared reads. A pool of ten thousand slots answers a read of its slots
// with megabytes that take the collector and the console tens of
// milliseconds each to encode and decode: a hundred viewers each reading
// them at every page would take seconds a page. The console therefore
// shares what it reads between the viewers whose tokens grant the same
// scopes, for which the API answers the same: one read at a time of each
// thing, kept sharedFresh, then served while one viewer's request reads it
// again in the background. Each viewer's token is still verified at each
// page, and a viewer is shown only reads made with the scopes of their
// own token.
const (
	// sharedFresh is how long a read is served without reading again.
	sharedFresh = 2 * time.Second
	// sharedStale is how long a read is served at all: past it, a page
	// waits for a new read rather than show what is that old.
	sharedStale = 30 * time.Second
	// maxShared bounds the reads kept (each filter of the jobs page is
	// one).
	maxShared = 1024
)

// sharedRead is one read: done is closed once v and err are set.
type sharedRead struct {
	done       chan struct{}
	at         time.Time
	v          any
	err        error
	refreshing bool
}

// sharedReads are the reads the console shares.
type sharedReads struct {
	mu sync.Mutex
	m  map[string]*sharedRead
}

// scopeKey names the scopes of a token: viewers of the same key are
// answered the same by the API.
func scopeKey(cl *auth.Claims) string {
	if cl == nil {
		return "open"
	}
	names := make([]string, len(cl.Scopes))
	for i, s := range cl.Scopes {
		names[i] = s.Name()
	}
	slices.Sort(names)
	return cl.Issuer + "\x00" + strings.Join(names, ",")
}

// shared returns what fetch reads for key, shared among the viewers of
// the scopes of rd's token: a fresh read as it is, one older than
// sharedFresh as it is while a new one is made in the background, one
// older than sharedStale never. A failed read is not shared (but for the
// agent's "not served"): each viewer waiting on it reads again for
// themselves, with their own token.
func (rd reader) shared(ctx context.Context, key string, fetch func(context.Context) (any, error)) (any, error) {
	c := rd.c
	key = rd.scopes + "\x00" + key
	now := c.cfg.Now()
	c.reads.mu.Lock()
	r := c.reads.m[key]
	switch {
	case r == nil:
	case !isDone(r):
		c.reads.mu.Unlock()
		select {
		case <-r.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if sharable(r.err) {
			return r.v, r.err
		}
		return fetch(ctx)
	case sharable(r.err) && now.Sub(r.at) < sharedFresh:
		c.reads.mu.Unlock()
		return r.v, r.err
	case sharable(r.err) && now.Sub(r.at) < sharedStale:
		if !r.refreshing {
			r.refreshing = true
			go rd.refresh(key, r, fetch)
		}
		c.reads.mu.Unlock()
		return r.v, r.err
	}
	r = &sharedRead{done: make(chan struct{})}
	c.reads.put(key, r, now)
	c.reads.mu.Unlock()
	r.v, r.err = fetch(ctx)
	r.at = c.cfg.Now()
	c.reads.mu.Lock()
	if !sharable(r.err) && c.reads.m[key] == r {
		delete(c.reads.m, key)
	}
	c.reads.mu.Unlock()
	close(r.done)
	return r.v, r.err
}

// refresh reads key again for the viewers of old, in the background of
// the page that found it stale, and replaces old once read.
func (rd reader) refresh(key string, old *sharedRead, fetch func(context.Context) (any, error)) {
	ctx, cancel := context.WithTimeout(context.Background(), pageTimeout)
	defer cancel()
	v, err := fetch(ctx)
	c := rd.c
	c.reads.mu.Lock()
	defer c.reads.mu.Unlock()
	old.refreshing = false
	if !sharable(err) || c.reads.m[key] != old {
		return
	}
	r := &sharedRead{done: make(chan struct{}), at: c.cfg.Now(), v: v, err: err}
	close(r.done)
	c.reads.put(key, r, r.at)
}

// put keeps r under key, dropping the reads too old to serve and, at
// maxShared, the oldest. s.mu is held.
func (s *sharedReads) put(key string, r *sharedRead, now time.Time) {
	if s.m == nil {
		s.m = map[string]*sharedRead{}
	}
	if len(s.m) >= maxShared {
		oldest := ""
		for k, o := range s.m {
			if !isDone(o) {
				continue
			}
			if now.Sub(o.at) >= sharedStale {
				delete(s.m, k)
				continue
			}
			if oldest == "" || o.at.Before(s.m[oldest].at) {
				oldest = k
			}
		}
		if len(s.m) >= maxShared && oldest != "" {
			delete(s.m, oldest)
		}
	}
	s.m[key] = r
}

// sharable reports whether a read's outcome is the same for every viewer
// of the same scopes: a success, or the agent's word that it runs no
// such thing (notServed). Any other failure may be the viewer's own (a
// token revoked, a request cancelled).
func sharable(err error) bool { return err == nil || notServed(err) }

func isDone(r *sharedRead) bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}
