package api

import "time"

// Paths of the pilot factory, served by an agent that runs a collector
// (a pool's central manager).
const (
	// PathFactory shows the factory's entries and their funnels (GET).
	PathFactory = "/v1/factory"
	// PathFactoryEntries + "/NAME" sets (PUT, an entry as JSON) or
	// removes (DELETE) one entry.
	PathFactoryEntries = "/v1/factory/entries/"
	// PathFactoryCredentials gives the factory its delegated key and CA
	// (PUT, FactoryCredentials as JSON), over TLS only.
	PathFactoryCredentials = "/v1/factory/credentials"
	// PathMetrics serves the agent's Prometheus metrics.
	PathMetrics = "/metrics"
)

// FactoryStatus is what GET /v1/factory answers.
type FactoryStatus struct {
	// Pool is the pool the factory grows.
	Pool string `json:"pool"`
	// LastCycle is when the factory last looked at its pool and sites;
	// Error what stopped that cycle, if anything did.
	LastCycle time.Time `json:"last_cycle,omitzero"`
	Error     string    `json:"error,omitempty"`
	// IdleJobs is how many idle jobs the pool had at the last cycle.
	IdleJobs int `json:"idle_jobs"`
	// Entries are the factory's entries, by name.
	Entries []FactoryEntry `json:"entries"`
	// Credentials are what the factory signs and certifies its glideins
	// with; nil when it has neither.
	Credentials *FactoryCredentialsStatus `json:"credentials,omitempty"`
	// NeedsCredentials is whether the sea requires tokens, which the
	// factory must sign for its glideins with a delegated key.
	NeedsCredentials bool `json:"needs_credentials,omitempty"`
}

// FactoryCredentials are the factory's delegated key
// (auth.Authority.Delegate, as auth.WriteSigningKey writes it) and, in a
// sea that speaks TLS, its delegated CA (auth.Authority.DelegateCA): what
// PUT /v1/factory/credentials takes. Both must be limited to the
// glideins of the central manager's own pool.
type FactoryCredentials struct {
	Key string `json:"key"`
	CA  string `json:"ca,omitempty"`
}

// FactoryCredentialsStatus is what the factory holds: the ID of its
// delegated key and the prefix it is limited to ("" without a key), and
// when its delegated CA expires (zero without one).
type FactoryCredentialsStatus struct {
	KeyID     string    `json:"key_id,omitempty"`
	Prefix    string    `json:"prefix,omitempty"`
	CAExpires time.Time `json:"ca_expires,omitzero"`
}

// FactoryEntry is one entry of the factory: its configuration, as given,
// and its funnel.
type FactoryEntry struct {
	Name string `json:"name"`
	// Config is the entry as it was set (PUT).
	Config any `json:"config"`
	// Funnel counts its glideins at each stage.
	Funnel Funnel `json:"funnel"`
	// Matched is how many idle jobs its glideins would run, at the last
	// cycle; Wanted how many glideins those need.
	Matched int `json:"matched"`
	Wanted  int `json:"wanted"`
	// Ramp is how many glideins it may submit in the next cycle.
	Ramp int `json:"ramp"`
	// Breaker is the state of its circuit breaker.
	Breaker BreakerStatus `json:"breaker"`
	// Capped, when not empty, says which cap of its budget (limits
	// max_instances, max_hourly_cost) stopped a submission its jobs
	// wanted at the last cycle.
	Capped string `json:"capped,omitempty"`
	// Offers are what its site may start glideins on (EC2 instance
	// types), cheapest first, and Wants what its last cycle wanted to
	// start, by offer.
	Offers []FactoryOffer `json:"offers,omitempty"`
	Wants  map[string]int `json:"wants,omitempty"`
	// Error is what went wrong with its site at the last cycle.
	Error string `json:"error,omitempty"`
	// CredentialsExpire is when the first of the credentials (token,
	// certificate) its queued and running glideins hold expires; the
	// factory renews each before then.
	CredentialsExpire time.Time `json:"credentials_expire,omitzero"`
	// Events are its last events (submissions, failures, losses), newest
	// last, each with its reason.
	Events []FactoryEvent `json:"events,omitempty"`
}

// Funnel counts an entry's glideins. Requested, Validated, Failed, Lost
// and Done count since the agent started, and the glideins its journal
// held then; Queued, Running, Joined and Claimed are the glideins in that
// stage now.
type Funnel struct {
	Requested int `json:"requested"`
	Queued    int `json:"queued"`
	Running   int `json:"running"`
	Validated int `json:"validated"`
	Joined    int `json:"joined"`
	Claimed   int `json:"claimed"`
	Failed    int `json:"failed"`
	Lost      int `json:"lost"`
	Done      int `json:"done"`
}

// BreakerStatus is an entry's circuit breaker.
type BreakerStatus struct {
	// Open is true while the entry submits nothing, until Until, for
	// Reason.
	Open   bool      `json:"open"`
	Until  time.Time `json:"until,omitzero"`
	Reason string    `json:"reason,omitempty"`
	// RecentFailures is how many glideins failed within its window.
	RecentFailures int `json:"recent_failures"`
}

// FactoryEvent is one thing that happened to a glidein of an entry.
type FactoryEvent struct {
	Time    time.Time `json:"time"`
	Glidein string    `json:"glidein"`
	// What is requested, adopted, resubmitted, joined, failed, lost,
	// done, refreshed or breaker.
	What   string `json:"what"`
	Reason string `json:"reason,omitempty"`
}

// FactoryOffer is one kind of machine an entry's site may start glideins
// on (an EC2 instance type), with what it has and costs.
type FactoryOffer struct {
	Name     string `json:"name"`
	CPUs     int    `json:"cpus"`
	MemoryMB int    `json:"memory_mb"`
	GPUs     int    `json:"gpus,omitempty"`
	// USDPerHour is its price; Priced is false when the site has none.
	USDPerHour float64 `json:"usd_per_hour,omitempty"`
	Priced     bool    `json:"priced"`
}
