package asuser

import (
	"errors"
	"sync"
	"time"
)

// DefaultRefresh is how long a Cache keeps an account: HTCondor's
// PASSWD_CACHE_REFRESH default.
const DefaultRefresh = 72000 * time.Second

// maxCached bounds the accounts a Cache keeps; past it, it forgets them
// all and looks each up again.
const maxCached = 10000

// Cache keeps the accounts a lookup found for a while, as HTCondor's
// daemons keep users' ids and groups (PASSWD_CACHE_REFRESH): a schedd
// acts as a job's owner for every event it writes to the job's log, and
// looking the owner up each time reads the system's user and group
// databases (and asks a directory service, where one serves them). A
// name the lookup does not know, or an error, is not kept: the next
// lookup asks again.
type Cache struct {
	lookup  func(string) (*Account, error)
	refresh time.Duration
	now     func() time.Time

	mu sync.Mutex
	m  map[string]cachedAccount
}

type cachedAccount struct {
	acct    *Account
	expires time.Time
}

// NewCache returns a Cache of lookup's accounts, each kept for refresh
// from when it was looked up (none kept when refresh is not positive, as
// HTCondor's PASSWD_CACHE_REFRESH = 0 keeps none); now is the clock
// (time.Now when nil).
func NewCache(lookup func(string) (*Account, error), refresh time.Duration, now func() time.Time) *Cache {
	if now == nil {
		now = time.Now
	}
	return &Cache{lookup: lookup, refresh: refresh, now: now, m: map[string]cachedAccount{}}
}

// Reset forgets every account kept, and keeps those looked up from now
// on for refresh (none when not positive).
func (c *Cache) Reset(refresh time.Duration) {
	c.mu.Lock()
	clear(c.m)
	c.refresh = refresh
	c.mu.Unlock()
}

// Lookup returns the account name, kept or looked up. The account is
// shared: callers must not change it.
func (c *Cache) Lookup(name string) (*Account, error) {
	now := c.now()
	c.mu.Lock()
	e, ok := c.m[name]
	refresh := c.refresh
	c.mu.Unlock()
	if ok && now.Before(e.expires) {
		return e.acct, nil
	}
	a, err := c.lookup(name)
	if err != nil {
		if errors.Is(err, ErrNoAccount) {
			// A removed account is not acted as any longer.
			c.mu.Lock()
			delete(c.m, name)
			c.mu.Unlock()
		}
		return nil, err
	}
	if refresh <= 0 {
		return a, nil
	}
	c.mu.Lock()
	if len(c.m) >= maxCached {
		clear(c.m)
	}
	c.m[name] = cachedAccount{acct: a, expires: now.Add(refresh)}
	c.mu.Unlock()
	return a, nil
}
