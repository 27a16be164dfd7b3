// Package api is the node agent's HTTP API as its clients see it: the
// request and answer types of every route, the agent.json file a launcher
// reads, and the one Client that pondctl, the providers and other agents use
// to talk to an agent.
//
// The agent (overlay/agent) serves these routes; nothing here runs a
// server. Types that belong to a lower layer's model (a gossip member, a tree
// query) are aliased, so that a client needs this package alone.
package api
