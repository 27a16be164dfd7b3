package api

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Routes of the agent's API.
const (
	PathHealth  = "/v1/health"
	PathSelf    = "/v1/self"
	PathMembers = "/v1/members"
	PathLeave   = "/v1/leave"
	PathTags    = "/v1/tags"
	PathKeys    = "/v1/keys"
	PathQuery   = "/v1/query"
	PathMatch   = "/v1/match"
	PathPond    = "/v1/pond"
	PathInvite  = "/v1/pond/invite"
	PathRelease = "/v1/pond/release"
	PathPolicy  = "/v1/policy"
	// PathRelayAttach and PathRelayCheck are served by every agent for the
	// workers it relays for (overlay/relay): a worker opens its tunnel at
	// the first and asks for a connect-back check at the second.
	PathRelayAttach = "/v1/relay/attach"
	PathRelayCheck  = "/v1/relay/check"
	// PathRelay lists the workers an agent relays for; PathRelayDrop
	// closes one's tunnel (it attaches again).
	PathRelay     = "/v1/relay"
	PathRelayDrop = "/v1/relay/drop"
	// PathFailover shows a pool member's view of its central manager's
	// fail-over (GET) and takes the state the manager replicates to its
	// replicas (PUT, from the manager's node token only).
	PathFailover = "/v1/failover"
)

// FailoverStatus is a pool member's view of its central manager's
// fail-over (GET /v1/failover).
type FailoverStatus struct {
	Pool string `json:"pool"`
	Node string `json:"node"`
	// Replicas is how many replicas the pool keeps (POND_CM_REPLICAS).
	Replicas int `json:"replicas"`
	// Acting says the node is its pool's central manager now, at Epoch.
	Acting bool  `json:"acting"`
	Epoch  int64 `json:"epoch"`
	// Manager and ManagerAPI are the live member the node follows, and
	// ManagerEpoch its epoch (0 when it follows none yet).
	Manager      string `json:"manager,omitempty"`
	ManagerAPI   string `json:"manager_api,omitempty"`
	ManagerEpoch int64  `json:"manager_epoch"`
	// Since is when the node last became manager or changed the manager
	// it follows.
	Since time.Time `json:"since,omitzero"`
	// LastCycle and LastMatches describe the node's latest negotiation
	// cycle, when it runs a negotiator.
	LastCycle   time.Time `json:"last_cycle,omitzero"`
	LastMatches int       `json:"last_matches"`
	// State is the latest replicated state the node holds.
	State *FailoverState `json:"state,omitempty"`
}

// RelayWorker is a worker an agent relays for (GET /v1/relay), with the
// addresses the relay serves it on and whether its tunnel is up.
type RelayWorker struct {
	Name      string     `json:"name"`
	Addrs     RelayAddrs `json:"addrs"`
	Connected bool       `json:"connected"`
}

// RelayAddrs are the addresses a relay serves one worker on, which the
// worker advertises as its own.
type RelayAddrs struct {
	// Gossip is IP:PORT, TCP and UDP.
	Gossip string `json:"gossip"`
	// API and Tree are TCP addresses, IP:PORT.
	API  string `json:"api"`
	Tree string `json:"tree"`
	// Relay is the relay's node name.
	Relay string `json:"relay,omitempty"`
}

// RelayDropRequest is the body of POST /v1/relay/drop.
type RelayDropRequest struct {
	Name string `json:"name"`
}

// InfoFile is the name, inside an agent's data directory, of the file where
// a running agent records its real addresses.
const InfoFile = "agent.json"

// Info is the content of DATA_DIR/agent.json, written atomically once the
// agent has bound its sockets.
type Info struct {
	Name    string    `json:"name"`
	PID     int       `json:"pid"`
	API     string    `json:"api"`
	Gossip  string    `json:"gossip"`
	Started time.Time `json:"started"`
}

// ReadInfo reads DATA_DIR/agent.json.
func ReadInfo(dataDir string) (*Info, error) {
	path := filepath.Join(dataDir, InfoFile)
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var info Info
	if err := json.Unmarshal(data, &info); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &info, nil
}

// Self describes an agent, as GET /v1/self returns it.
type Self struct {
	Name       string    `json:"name"`
	API        string    `json:"api"`
	Gossip     string    `json:"gossip"`
	Pool       string    `json:"pool"`
	Pond       string    `json:"pond"`
	Role       string    `json:"role"`
	CondorHost string    `json:"condor_host"`
	PID        int       `json:"pid"`
	Started    time.Time `json:"started"`
	Encrypted  bool      `json:"encrypted"`
	// Reach says how other nodes reach the agent: ReachDirect, or
	// ReachReverse for one reached only through its own outbound
	// connection to its relay.
	Reach string `json:"reach,omitempty"`
	// Relay is the name of the agent's relay when Reach is ReachReverse.
	Relay      string            `json:"relay,omitempty"`
	Tags       map[string]string `json:"tags"`
	Attributes map[string]any    `json:"attributes"`
	Config     map[string]string `json:"config,omitempty"`
	// Token describes the token the agent presents to other agents and
	// daemons (never the token itself); nil without one.
	Token *TokenInfo `json:"token,omitempty"`
	// Glidein is where the agent is in its life as a glidein (-glidein);
	// nil for an agent that is no glidein.
	Glidein *GlideinStatus `json:"glidein,omitempty"`
	// Quarantine, when the node is quarantined as a black hole (it could not
	// start jobs again and again), says why and until when: a pilot
	// factory retires and replaces such a node. Nil when it takes jobs.
	Quarantine *Quarantine `json:"quarantine,omitempty"`
	// EndTime is when the node goes away (POND_END_TIME), if it knows.
	EndTime time.Time `json:"end_time,omitzero"`
}

// Quarantine is a node's quarantine in Self.
type Quarantine struct {
	Reason string    `json:"reason"`
	Since  time.Time `json:"since"`
	Until  time.Time `json:"until"`
}

// TokenInfo describes an agent's own token in Self.
type TokenInfo struct {
	File    string    `json:"file"`              // the token file
	Subject string    `json:"subject,omitempty"` // whom it names ("node/NAME")
	ID      string    `json:"id,omitempty"`      // its ID, for pondctl token revoke
	Expires time.Time `json:"expires,omitzero"`  // when it expires
	Error   string    `json:"error,omitempty"`   // why it cannot be read
}

// Health is what GET /v1/health returns.
type Health struct {
	Status  string `json:"status"`
	Name    string `json:"name"`
	Members int    `json:"members"`
}

// MembersFilter narrows Members: by serf status ("alive", "left",
// "failed", ...) and by tags that must all match exactly.
type MembersFilter struct {
	Status string
	Tags   map[string]string
}

// KeyRequest is the body of POST /v1/keys/{install,use,remove}.
type KeyRequest struct {
	Key string `json:"key"`
}

// Error is the body of every answer that is not a success.
type Error struct {
	Error string `json:"error"`
}
