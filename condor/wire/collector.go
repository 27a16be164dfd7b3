package wire

import "context"

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
type UpdateRequest struct {
	Type     string        `json:"type"`
	Source   string        `json:"source"`
	Ads      []Ad          `json:"ads"`
	Private  map[string]Ad `json:"private,omitempty"`
	Lifetime int           `json:"lifetime,omitempty"` // seconds; 0: the collector's CLASSAD_LIFETIME
}

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

// Collector is a client of a pool's collector.
type Collector struct{ c *Client }

// NewCollector returns a client of the collector served at addr (the
// central manager's API address) presenting token.
func NewCollector(addr, token string) *Collector { return NewClient(addr, token).Collector() }

// Collector returns a client of the collector of c's node.
func (c *Client) Collector() *Collector { return &Collector{c} }

// Addr returns the API address of the collector's node.
func (c *Collector) Addr() string { return c.c.Addr }

// Update replaces the source's ads of a type.
func (c *Collector) Update(ctx context.Context, req *UpdateRequest) error {
	return c.c.Call(ctx, pathCollectorUpdate, req, nil)
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
