package api

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/pond-htc/pond/condor/wire"
)

// DefaultTimeout bounds each request when the context has no earlier
// deadline, except those that last as long as the work they ask for
// (queries, key operations, releases).
const DefaultTimeout = 5 * time.Second

// InviteTimeout bounds an invitation: the invited node reconfigures its
// daemons before it answers.
const InviteTimeout = 20 * time.Second

// KeyTimeout bounds a key operation: the agent sends serf's query again,
// each time waiting out serf's query timeout, until every member answers.
const KeyTimeout = 2 * time.Minute

// Client talks to one agent's HTTP API, with the JSON-over-HTTP client
// the daemons share (condor/wire).
type Client struct {
	addr string
	wc   *wire.Client
}

// NewClient returns a client for the agent whose API listens at addr
// (IP:PORT, or an http:// URL). It speaks plain HTTP until given the sea's
// TLS with WithTLS.
func NewClient(addr string) *Client {
	addr = strings.TrimRight(strings.TrimPrefix(addr, "http://"), "/")
	return &Client{addr: addr, wc: wire.NewClient(addr, "")}
}

// WithTLS returns a client that speaks HTTPS with cfg, as
// condor/auth.ClientTLS makes it: it then calls only an agent that proves
// it belongs to the sea, before it sends anything (its token included).
// nil gives a client of plain HTTP.
func (c *Client) WithTLS(cfg *tls.Config) *Client {
	return &Client{addr: c.addr, wc: c.wc.WithTLS(cfg)}
}

// WithToken returns a client that presents token (a bearer token of
// condor/auth) with every request; "" presents none.
func (c *Client) WithToken(token string) *Client {
	wc := *c.wc
	wc.Token = token
	return &Client{addr: c.addr, wc: &wc}
}

// Addr is the API address the client talks to.
func (c *Client) Addr() string { return c.addr }

// StatusError is an answer that is not a success: Status is its HTTP
// status and Msg the agent's error message.
type StatusError = wire.Error

// call runs one request bounded by d (none when d is zero) and ctx.
func (c *Client) call(ctx context.Context, d time.Duration, method, path string, body, out any) error {
	if d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	if err := c.wc.Do(ctx, method, path, body, out); err != nil {
		return fmt.Errorf("agent API %s %s: %w", method, path, err)
	}
	return nil
}

// Health checks that the agent is up.
func (c *Client) Health(ctx context.Context) (*Health, error) {
	var h Health
	if err := c.call(ctx, DefaultTimeout, http.MethodGet, PathHealth, nil, &h); err != nil {
		return nil, err
	}
	return &h, nil
}

// Self describes the agent.
func (c *Client) Self(ctx context.Context) (*Self, error) {
	var s Self
	if err := c.call(ctx, DefaultTimeout, http.MethodGet, PathSelf, nil, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// RelayWorkers lists the workers the agent relays for.
func (c *Client) RelayWorkers(ctx context.Context) ([]RelayWorker, error) {
	var out []RelayWorker
	if err := c.call(ctx, DefaultTimeout, http.MethodGet, PathRelay, nil, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// RelayDrop closes the tunnel of the worker name, which the agent relays
// for, as a network fault would: the worker attaches again.
func (c *Client) RelayDrop(ctx context.Context, name string) error {
	return c.call(ctx, DefaultTimeout, http.MethodPost, PathRelayDrop, RelayDropRequest{Name: name}, nil)
}

// Members lists the sea's members as the agent sees them.
func (c *Client) Members(ctx context.Context, f MembersFilter) ([]Member, error) {
	q := url.Values{}
	if f.Status != "" {
		q.Set("status", f.Status)
	}
	for k, v := range f.Tags {
		q.Add("tag", k+"="+v)
	}
	path := PathMembers
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var ms []Member
	if err := c.call(ctx, DefaultTimeout, http.MethodGet, path, nil, &ms); err != nil {
		return nil, err
	}
	return ms, nil
}

// Leave tells the agent to leave the sea gracefully and exit.
func (c *Client) Leave(ctx context.Context) error {
	return c.call(ctx, DefaultTimeout, http.MethodPost, PathLeave, nil, nil)
}

// SetTags sets serf tags on the agent (an empty value removes a tag) and
// returns its tags after the change.
func (c *Client) SetTags(ctx context.Context, tags map[string]string) (map[string]string, error) {
	var out map[string]string
	if err := c.call(ctx, DefaultTimeout, http.MethodPut, PathTags, tags, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// ListKeys asks the sea which gossip keys its nodes hold.
func (c *Client) ListKeys(ctx context.Context) (*KeyResult, error) {
	var r KeyResult
	if err := c.call(ctx, KeyTimeout, http.MethodGet, PathKeys, nil, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// InstallKey installs a gossip key on every node of the sea.
func (c *Client) InstallKey(ctx context.Context, key string) (*KeyResult, error) {
	return c.keyOp(ctx, "install", key)
}

// UseKey makes an installed key primary on every node of the sea.
func (c *Client) UseKey(ctx context.Context, key string) (*KeyResult, error) {
	return c.keyOp(ctx, "use", key)
}

// RemoveKey removes a key from every node of the sea.
func (c *Client) RemoveKey(ctx context.Context, key string) (*KeyResult, error) {
	return c.keyOp(ctx, "remove", key)
}

func (c *Client) keyOp(ctx context.Context, op, key string) (*KeyResult, error) {
	var r KeyResult
	if err := c.call(ctx, KeyTimeout, http.MethodPost, PathKeys+"/"+op, KeyRequest{Key: key}, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// Query runs a tree query with the agent as root. A zero q.Deadline means
// DefaultQueryTimeout from now; the request lasts until the deadline and
// five seconds more.
func (c *Client) Query(ctx context.Context, q Query) (*Answer, error) {
	if q.Deadline.IsZero() {
		q.Deadline = time.Now().Add(DefaultQueryTimeout)
	}
	ctx, cancel := context.WithDeadline(ctx, q.Deadline.Add(5*time.Second))
	defer cancel()
	var ans Answer
	if err := c.call(ctx, 0, http.MethodPost, PathQuery, q, &ans); err != nil {
		var se *StatusError
		if errors.As(err, &se) && se.Status == http.StatusNotFound {
			return nil, fmt.Errorf("query at %s: this agent does not serve tree queries", c.addr)
		}
		return nil, err
	}
	return &ans, nil
}

// Match runs a pond-match serf query from the agent. The request lasts as
// long as the query (serf's default timeout, up to a minute, when
// req.Timeout is zero) and DefaultTimeout more.
func (c *Client) Match(ctx context.Context, req MatchRequest) (*MatchAnswer, error) {
	wait := req.Timeout
	if wait <= 0 {
		wait = time.Minute
	}
	var ans MatchAnswer
	if err := c.call(ctx, wait+DefaultTimeout, http.MethodPost, PathMatch, req, &ans); err != nil {
		return nil, err
	}
	return &ans, nil
}

// Invite sends the agent an invitation into a pond.
func (c *Client) Invite(ctx context.Context, inv Invitation) (Reply, error) {
	var r Reply
	err := c.call(ctx, InviteTimeout, http.MethodPost, PathInvite, inv, &r)
	return r, err
}

// Release asks the agent to leave the pond pondID, draining first as d
// says; it returns when the node has left, or has refused. The call is
// bounded by the drain's timeout plus half a minute, and by ctx.
func (c *Client) Release(ctx context.Context, pondID string, d Drain) (ReleaseResult, error) {
	var r ReleaseResult
	err := c.call(ctx, d.Limit()+30*time.Second, http.MethodPost, PathRelease, ReleaseRequest{PondID: pondID, Drain: d}, &r)
	return r, err
}

// Membership returns the agent's pond membership, or nil when it is free.
func (c *Client) Membership(ctx context.Context) (*Membership, error) {
	var r MembershipStatus
	if err := c.call(ctx, InviteTimeout, http.MethodGet, PathPond, nil, &r); err != nil {
		return nil, err
	}
	return r.Membership, nil
}

// Factory shows the pilot factory of a central manager's agent.
func (c *Client) Factory(ctx context.Context) (*FactoryStatus, error) {
	var out FactoryStatus
	if err := c.call(ctx, DefaultTimeout, http.MethodGet, PathFactory, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// SetFactoryEntry adds or replaces the factory entry name, given as JSON
// (overlay/api.FactoryEntrySpec).
func (c *Client) SetFactoryEntry(ctx context.Context, name string, entry json.RawMessage) error {
	return c.call(ctx, DefaultTimeout, http.MethodPut, PathFactoryEntries+url.PathEscape(name), entry, nil)
}

// SetFactoryCredentials gives the factory of a central manager's agent
// its delegated key and CA.
func (c *Client) SetFactoryCredentials(ctx context.Context, creds FactoryCredentials) (*FactoryStatus, error) {
	var out FactoryStatus
	if err := c.call(ctx, DefaultTimeout, http.MethodPut, PathFactoryCredentials, creds, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// RemoveFactoryEntry removes the factory entry name. The agent answers
// once a cycle of the factory under way (which may be submitting the
// entry's glideins) is over: it is given a minute.
func (c *Client) RemoveFactoryEntry(ctx context.Context, name string) error {
	return c.call(ctx, time.Minute, http.MethodDelete, PathFactoryEntries+url.PathEscape(name), nil, nil)
}

// Failover shows the agent's view of its pool's central-manager fail-over.
func (c *Client) Failover(ctx context.Context) (*FailoverStatus, error) {
	var out FailoverStatus
	if err := c.call(ctx, DefaultTimeout, http.MethodGet, PathFailover, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// PushFailover gives a replica its central manager's state; only the
// manager's node token may.
func (c *Client) PushFailover(ctx context.Context, st *FailoverState) error {
	return c.call(ctx, DefaultTimeout, http.MethodPut, PathFailover, st, nil)
}
