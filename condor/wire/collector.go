package wire

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
	PathCollectorUpdate     = "collector/update"
	PathCollectorInvalidate = "collector/invalidate"
	PathCollectorQuery      = "collector/query"
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
