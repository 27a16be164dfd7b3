package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/pond-htc/pond/overlay/gossip"
)

// Client talks to an agent's HTTP API.
type Client struct {
	base string
	hc   *http.Client
}

// DefaultTimeout bounds each client request when the context has no
// earlier deadline.
const DefaultTimeout = 5 * time.Second

// NewClient returns a client for the agent whose API listens at addr
// (IP:PORT, or a full http:// URL).
func NewClient(addr string) *Client {
	base := addr
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	return &Client{base: strings.TrimRight(base, "/"), hc: &http.Client{Timeout: DefaultTimeout}}
}

// MembersFilter narrows Members: by serf status ("alive", "left",
// "failed", ...) and by tags that must all match exactly.
type MembersFilter struct {
	Status string
	Tags   map[string]string
}

func (c *Client) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return fmt.Errorf("agent API %s %s: %w", method, path, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("agent API %s %s: %w", method, c.base+path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("agent API %s %s: reading answer: %w", method, c.base+path, err)
	}
	if resp.StatusCode/100 != 2 {
		var e apiError
		if json.Unmarshal(data, &e) == nil && e.Error != "" {
			return fmt.Errorf("agent API %s %s: %s: %s", method, c.base+path, resp.Status, e.Error)
		}
		return fmt.Errorf("agent API %s %s: %s", method, c.base+path, resp.Status)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("agent API %s %s: decoding answer: %w", method, c.base+path, err)
		}
	}
	return nil
}

// Health checks that the agent is up.
func (c *Client) Health(ctx context.Context) (*Health, error) {
	var h Health
	if err := c.do(ctx, http.MethodGet, "/v1/health", nil, &h); err != nil {
		return nil, err
	}
	return &h, nil
}

// Self describes the agent.
func (c *Client) Self(ctx context.Context) (*Self, error) {
	var s Self
	if err := c.do(ctx, http.MethodGet, "/v1/self", nil, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// Members lists the sea's members as the agent sees them.
func (c *Client) Members(ctx context.Context, f MembersFilter) ([]gossip.Member, error) {
	q := url.Values{}
	if f.Status != "" {
		q.Set("status", f.Status)
	}
	for k, v := range f.Tags {
		q.Add("tag", k+"="+v)
	}
	path := "/v1/members"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var ms []gossip.Member
	if err := c.do(ctx, http.MethodGet, path, nil, &ms); err != nil {
		return nil, err
	}
	return ms, nil
}

// Leave tells the agent to leave the sea gracefully and exit.
func (c *Client) Leave(ctx context.Context) error {
	return c.do(ctx, http.MethodPost, "/v1/leave", nil, nil)
}

// SetTags sets serf tags on the agent (an empty value removes a tag) and
// returns its tags after the change.
func (c *Client) SetTags(ctx context.Context, tags map[string]string) (map[string]string, error) {
	var out map[string]string
	if err := c.do(ctx, http.MethodPut, "/v1/tags", tags, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// ListKeys asks the sea which gossip keys its nodes hold.
func (c *Client) ListKeys(ctx context.Context) (*gossip.KeyResult, error) {
	long, ctx, cancel := c.long(ctx, KeyTimeout)
	defer cancel()
	var r gossip.KeyResult
	if err := long.do(ctx, http.MethodGet, "/v1/keys", nil, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// InstallKey installs a gossip key on every node of the gossip.
func (c *Client) InstallKey(ctx context.Context, key string) (*gossip.KeyResult, error) {
	return c.keyOp(ctx, "install", key)
}

// UseKey makes an installed key primary on every node of the gossip.
func (c *Client) UseKey(ctx context.Context, key string) (*gossip.KeyResult, error) {
	return c.keyOp(ctx, "use", key)
}

// RemoveKey removes a key from every node of the gossip.
func (c *Client) RemoveKey(ctx context.Context, key string) (*gossip.KeyResult, error) {
	return c.keyOp(ctx, "remove", key)
}

func (c *Client) keyOp(ctx context.Context, op, key string) (*gossip.KeyResult, error) {
	long, ctx, cancel := c.long(ctx, KeyTimeout)
	defer cancel()
	var r gossip.KeyResult
	if err := long.do(ctx, http.MethodPost, "/v1/keys/"+op, keyRequest{Key: key}, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// KeyTimeout bounds a key operation: the agent sends serf's query again,
// each time waiting out serf's query timeout, until every member answers.
const KeyTimeout = 2 * time.Minute

// long returns a client without DefaultTimeout and a context that ends
// after d.
func (c *Client) long(ctx context.Context, d time.Duration) (*Client, context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(ctx, d)
	return &Client{base: c.base, hc: &http.Client{}}, ctx, cancel
}

// Match runs a pond-match serf query from the agent (see Agent.Match).
// The request lasts as long as the query (serf's default timeout, up to a
// minute, when req.Timeout is zero) and DefaultTimeout more.
func (c *Client) Match(ctx context.Context, req MatchRequest) (*MatchAnswer, error) {
	wait := req.Timeout
	if wait <= 0 {
		wait = time.Minute
	}
	long, ctx, cancel := c.long(ctx, wait+DefaultTimeout)
	defer cancel()
	var ans MatchAnswer
	if err := long.do(ctx, http.MethodPost, "/v1/match", req, &ans); err != nil {
		return nil, err
	}
	return &ans, nil
}
