// Package api is the node agent's HTTP API as its clients see it: the
// request and answer types of every route, the agent.json file a launcher
// reads, the gossip tag names a member carries, and the one Client that
// pondctl, the providers and other agents use to talk to an agent (with
// InviteAll, the inviting side of pond membership).
//
// The agent (overlay/agent) serves these routes; nothing here runs a
// server. The package is a leaf: it imports only the daemons' wire types
// (condor/wire, condor/auth, condor/classad), overlay/ring and the table of
// the agent's knobs (overlay/knobs), never an engine of the overlay nor
// serf, memberlist or yamux, so that a client needs this package alone.
// The engines (overlay/tree, gossip, relay, flock, failover, factory,
// glidein) take their wire types from here: a pilot factory's entries and
// a glidein's validation checks among them.
package api
