package api

import (
	"net"
	"strconv"
)

// Member is one node of the sea as an agent sees it (GET /v1/members):
// overlay/gossip reports its serf members as such.
type Member struct {
	Name   string            `json:"name"`
	Addr   string            `json:"addr"`
	Port   uint16            `json:"port"`
	Tags   map[string]string `json:"tags"`
	Status string            `json:"status"`
	// Reach says how the member is reached: ReachDirect (others dial
	// it) or ReachReverse (reached only through its own outbound
	// connection to its relay).
	Reach string `json:"reach"`
	// Relay is the name of the agent that relays for a member whose
	// Reach is ReachReverse (its TagRelay), empty otherwise.
	Relay string `json:"relay,omitempty"`
	// Coordinate is the member's network coordinate when known.
	Coordinate *Coordinate `json:"coordinate,omitempty"`
}

// Coordinate is a member's network coordinate, as serf's Vivaldi client
// estimates it (github.com/hashicorp/serf/coordinate.Coordinate, to which
// it converts): distances in seconds.
type Coordinate struct {
	// Vec is the Euclidean portion of the coordinate.
	Vec []float64
	// Error reflects the confidence in the coordinate (dimensionless).
	Error float64
	// Adjustment is a distance offset computed over observations from
	// the other nodes.
	Adjustment float64
	// Height is a distance offset for the node's access link.
	Height float64
}

// GossipAddr is the member's gossip address, IP:PORT.
func (m Member) GossipAddr() string {
	return net.JoinHostPort(m.Addr, strconv.Itoa(int(m.Port)))
}

// IsPond reports whether the member carries pond's tags (as opposed to, for
// example, a plain "serf agent" that joined the sea).
func (m Member) IsPond() bool {
	_, ok := m.Tags[TagVersion]
	return ok
}

// Tag names that pond agents set on their serf member, as Member.Tags
// shows them. Serf limits the encoded tags of a member to 512 bytes, so
// names and values are short.
const (
	// TagRole is RoleCM for a central manager and RoleNode otherwise.
	TagRole = "role"
	// TagPool is the name of the pool the node belongs to, empty if free.
	TagPool = "pool"
	// TagPond is the name of the pond the node serves, empty if none.
	TagPond = "pond"
	// TagCM is the API address of the node's central manager (its
	// CONDOR_HOST); a free node names itself.
	TagCM = "cm"
	// TagAPI is the node's HTTP API address.
	TagAPI = "api"
	// TagVersion is the pond protocol version the node speaks.
	TagVersion = "v"
	// TagRelay names the agent that relays for a node behind NAT
	// (overlay/relay); a node reached directly has none.
	TagRelay = "relay"
	// TagMoving is set, to its new gossip address, by a node that moves
	// to another one (overlay/gossip's Move): it leaves the sea and joins
	// again at once under the same name, and its peers take the leave for
	// a move, not for the node's loss, for a grace period.
	TagMoving = "mv"
	// TagTree is the address of the node's tree-query transport
	// (overlay/tree).
	TagTree = "tree"
	// TagQuarantined is set, to the reason, while the node is quarantined
	// as a black hole (see Self.Quarantine).
	TagQuarantined = "quarantined"
	// TagEpoch is the tag of the node that acts as its pool's central
	// manager: the epoch it negotiates at (overlay/failover). Other nodes
	// carry none.
	TagEpoch = "epoch"
	// TagCredExpiry is set while one of the node's credentials is within
	// an alarm's threshold of its expiry (POND_CREDENTIAL_ALARMS): the
	// credential that expires first and when, "NAME:UNIX"
	// (overlay/tokenwatch.Tag).
	TagCredExpiry = "credexp"
)

// Roles, the values of TagRole.
const (
	RoleCM   = "cm"
	RoleNode = "node"
)

// Member statuses, as serf reports them.
const (
	StatusAlive   = "alive"
	StatusLeaving = "leaving"
	StatusLeft    = "left"
	StatusFailed  = "failed"
)

// How a member or an agent is reached (Member.Reach, Self.Reach).
const (
	// ReachDirect: other nodes dial the member's own addresses.
	ReachDirect = "direct"
	// ReachReverse: the member accepts no inbound connection; it is
	// reached only through its own outbound connection to its relay,
	// which listens on its behalf.
	ReachReverse = "reverse"
)

// ReachOf says how a member with tags is reached: ReachReverse when its
// TagRelay names a relay, ReachDirect otherwise.
func ReachOf(tags map[string]string) string {
	if tags[TagRelay] != "" {
		return ReachReverse
	}
	return ReachDirect
}

// RelayOf is the name of the relay a member with tags is reached
// through (its TagRelay), empty for a member reached directly.
func RelayOf(tags map[string]string) string { return tags[TagRelay] }

// Reach says how a member is reached, from its tags: ReachDirect, or
// ReachReverse for a worker behind a relay.
func Reach(m Member) string { return ReachOf(m.Tags) }

// Relay is the name of the relay a member is reached through, from its
// tags; empty for a member reached directly.
func Relay(m Member) string { return RelayOf(m.Tags) }

// ParseEpoch reads a TagEpoch value: 0 when empty or not a positive whole
// number.
func ParseEpoch(tag string) int64 {
	e, err := strconv.ParseInt(tag, 10, 64)
	if err != nil || e < 0 {
		return 0
	}
	return e
}

// KeyResult is the sea-wide outcome of a gossip key operation.
type KeyResult struct {
	// NumNodes is how many nodes were asked; NumResp how many answered;
	// NumErr how many failed.
	NumNodes int `json:"num_nodes"`
	NumResp  int `json:"num_resp"`
	NumErr   int `json:"num_err"`
	// Messages maps node names to their error messages.
	Messages map[string]string `json:"messages,omitempty"`
	// Keys maps each base64 key to how many nodes hold it (ListKeys only).
	Keys map[string]int `json:"keys,omitempty"`
	// PrimaryKeys maps each primary key to how many nodes use it.
	PrimaryKeys map[string]int `json:"primary_keys,omitempty"`
}
