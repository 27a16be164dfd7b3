package wire

import (
	"context"
	"errors"
	"fmt"

	"github.com/pond-htc/pond/condor/classad"
)

// Ad types as HTCondor's MyType names them.
const (
	TypeMachine    = "Machine"
	TypeSchedd     = "Scheduler"
	TypeSubmitter  = "Submitter"
	TypeNegotiator = "Negotiator"
	TypeMaster     = "DaemonMaster"
	TypeAny        = "Any"
)

// Paths of the collector's endpoints, relative to PathPrefix.
const (
	pathCollectorUpdate     = "collector/update"
	pathCollectorInvalidate = "collector/invalidate"
	pathCollectorQuery      = "collector/query"
)

// UpdateRequest replaces the ads of one type that one source (a daemon,
// named e.g. "startd@node1") advertises. Private holds, by ad Name, the
// attributes only the pool's negotiator sees (such as a slot's ClaimId).
//
// A partial update (Partial) replaces only the source's ads of the same
// Name as the ads it carries (each of which needs a Name), with their
// private attributes and lifetime, drops the ads Removed names, and keeps
// the source's other ads as they are; a full update replaces all of the
// source's ads of the type, so that an ad it no longer carries goes. A
// collector answers a partial update for a source of which it holds no
// live ad with ErrConflict: the source then sends a full one.
type UpdateRequest struct {
	Type     string        `json:"type"`
	Source   string        `json:"source"`
	Ads      []Ad          `json:"ads"`
	Private  map[string]Ad `json:"private,omitempty"`
	Lifetime int           `json:"lifetime,omitempty"` // seconds; 0: the collector's CLASSAD_LIFETIME
	Partial  bool          `json:"partial,omitempty"`
	Removed  []string      `json:"removed,omitempty"` // names of the source's ads to drop; partial updates only
}

// UpdateResponse answers an update. Partial says that the collector took
// it as a partial update: a collector that predates partial updates
// answers without it, having replaced all of the source's ads with the
// partial update's.
type UpdateResponse struct {
	Partial bool `json:"partial,omitempty"`
}

// ErrPartialIgnored is the error of a partial update that a collector
// took as a full one (it predates partial updates): the source's ads it
// did not carry are gone from that collector until a full update.
var ErrPartialIgnored = errors.New("the collector does not take partial updates: it replaced all of the source's ads")

// InvalidateRequest drops the ads of one type from one source, as a daemon
// does when it shuts down.
type InvalidateRequest struct {
	Type   string `json:"type"`
	Source string `json:"source"`
}

// QueryAdsRequest selects ads of a type (TypeAny for all) with an optional
// constraint, keeping only the Projection attributes when it is set.
// WithPrivate merges the private attributes in.
type QueryAdsRequest struct {
	Type        string   `json:"type"`
	Constraint  string   `json:"constraint,omitempty"`
	Projection  []string `json:"projection,omitempty"`
	WithPrivate bool     `json:"with_private,omitempty"`
}

// QueryAdsResponse carries the ads a query selected, sorted by type and
// Name.
type QueryAdsResponse struct {
	Ads []Ad `json:"ads"`
}

// ParsedAd is an ad a collector in the same process selected, as it
// holds it: parsed, and shared with the collector and its other readers,
// so that no one may change it; Private are its private attributes
// (QueryAdsRequest.WithPrivate), nil without them.
type ParsedAd struct {
	Ad      *classad.Ad
	Private Ad
}

// Collector is a client of a pool's collector.
type Collector struct{ c *Client }

// NewCollector returns a client of the collector served at addr (the
// central manager's API address) presenting token.
func NewCollector(addr, token string) *Collector { return NewClient(addr, token).Collector() }

// Collector returns a client of the collector of c's node.
func (c *Client) Collector() *Collector { return &Collector{c} }

// Addr returns the API address of the collector's node.
func (c *Collector) Addr() string { return c.c.Addr }

// Update replaces the source's ads of a type (only those of the names it
// carries or removes, for a partial update). A partial update that the
// collector took as a full one gives ErrPartialIgnored.
func (c *Collector) Update(ctx context.Context, req *UpdateRequest) error {
	var resp UpdateResponse
	if err := c.c.Call(ctx, pathCollectorUpdate, req, &resp); err != nil {
		return err
	}
	if req.Partial && !resp.Partial {
		return fmt.Errorf("%w: %s", ErrPartialIgnored, c.c.Addr)
	}
	return nil
}

// Invalidate withdraws the source's ads of a type (of every type for
// TypeAny).
func (c *Collector) Invalidate(ctx context.Context, req *InvalidateRequest) error {
	return c.c.Call(ctx, pathCollectorInvalidate, req, nil)
}

// Query returns the ads a query selects.
func (c *Collector) Query(ctx context.Context, req *QueryAdsRequest) ([]Ad, error) {
	var resp QueryAdsResponse
	if err := c.c.Call(ctx, pathCollectorQuery, req, &resp); err != nil {
		return nil, err
	}
	return resp.Ads, nil
}
