package local

import (
	"fmt"

	"github.com/pond-htc/pond/overlay/knobs"
	"github.com/pond-htc/pond/providers"
	"github.com/zclconf/go-cty/cty"
)

// nodeDetailType is the element type of a pool's node_details.
var nodeDetailType = cty.Object(map[string]cty.Type{
	"name":   cty.String,
	"api":    cty.String,
	"gossip": cty.String,
	"pid":    cty.Number,
})

func providerSchema() *providers.ProviderSchema {
	return &providers.ProviderSchema{
		Provider: &providers.Schema{
			Description: "Runs nodes as pondctl agent processes on this machine.",
			Attributes: map[string]*providers.Attribute{
				"binary": {Type: cty.String, Optional: true,
					Description: "Path to the pondctl binary (default: $POND_BIN, else this executable)."},
				"bind_address": {Type: cty.String, Optional: true,
					Description: "IP address agents bind their gossip and API sockets to (default 127.0.0.1). The agents gossip encrypted on every address, loopback included, with encrypt or else the working directory's sea key (.pond/auth/gossip.key, made the first time)."},
				"gossip_profile": {Type: cty.String, Optional: true,
					Description: "Gossip timing profile: lan, wan, local (default) or fast."},
				"encrypt": {Type: cty.String, Optional: true, Sensitive: true,
					Description: "Base64 gossip encryption key for the agents (pondctl sea keygen). Default: the working directory's sea key."},
				"node_token_lifetime": {Type: cty.String, Optional: true,
					Description: "How long the token each node is given lasts, as a duration such as \"720h\" (default 30 days); a node relaunched gets a new one."},
				"max_nodes": {Type: cty.Number, Optional: true,
					Description: fmt.Sprintf("Most nodes of all the provider's pools together, each an agent process on this machine; plan refuses more (default %d).", DefaultMaxNodes)},
				"max_slots_per_node": {Type: cty.Number, Optional: true,
					Description: fmt.Sprintf("Most slots of one node; plan refuses more (default %d).", DefaultMaxSlotsPerNode)},
			},
		},
		Resources: map[string]*providers.Schema{
			"pool": {
				Description: "A pool of agents running as local processes.",
				Attributes: map[string]*providers.Attribute{
					"nodes": {Type: cty.Number, Optional: true, Computed: true,
						Description: "Number of nodes (default 1)."},
					"slots": {Type: cty.Number, Optional: true, Computed: true, ForceNew: true,
						Description: "Slots per node (default 1)."},
					"attributes": {Type: cty.DynamicPseudoType, Optional: true,
						Description: "Extra machine ClassAd attributes, as an object."},
					"config": {Type: cty.Map(cty.String), Optional: true,
						Description: "HTCondor configuration knobs written to each node's configuration file."},
					"reach": {Type: cty.String, Optional: true, ForceNew: true,
						Description: "How the pool's workers are reached: auto (default: the central manager tries to connect back to each), direct, or relay (a worker accepts no inbound connection and keeps one to the central manager, which listens on its behalf; reverse is a synonym, the reach pondctl sea members then shows)."},
					"replicas": {Type: cty.Number, Optional: true,
						Description: "How many of the pool's members keep a replica of its central manager's state (default 0: no fail-over). When the manager is gone, the first live replica takes over within seconds and the members follow it; the manager takes the pool back when it returns. See docs/failover.md."},
					"lenders_first": {Type: cty.Bool, Optional: true,
						Description: "Whether the pool's own jobs come first on its machines (default true): its startds rank a job of the pool 1000 higher than one flocked in from another pool, so the pool's jobs preempt flocked-in jobs within a negotiation cycle. Sets " + knobs.LendersFirst + "; a knob of config overrides it. See docs/flocks.md."},
					"free": {Type: cty.Bool, Optional: true, ForceNew: true,
						Description: "Nodes belong to no pool; each is its own central manager."},
					"id": {Type: cty.String, Computed: true,
						Description: "The pool's name."},
					"central_manager": {Type: cty.String, Computed: true,
						Description: "API address of the pool's central manager: node 0, or, while a replica acts for it (replicas), that replica."},
					"condor_host": {Type: cty.String, Computed: true,
						Description: "Address HTCondor's own clients use as CONDOR_HOST (COLLECTOR_HOST) for the pool: the central manager's agent, which serves CEDAR on its API port. Follows central_manager."},
					"sea": {Type: cty.String, Computed: true,
						Description: "API address of a live agent of the sea."},
					"members": {Type: cty.List(cty.String), Computed: true,
						Description: "Names of the live nodes, in order."},
					"node_details": {Type: cty.List(nodeDetailType), Computed: true,
						Description: "Name, API and gossip addresses and PID of each live node."},
				},
				BlockTypes: map[string]*providers.NestedBlock{
					"pond_policy": {Nesting: providers.NestingSingle, MaxItems: 1, Block: pondPolicySchema()},
				},
			},
		},
		DataSources: map[string]*providers.Schema{},
	}
}

// pondPolicySchema is the pool's pond_policy block: each node running a
// schedd grows ponds from the sea for its own idle jobs. Each argument maps
// to a POND_POLICY_* knob of the nodes' configuration, whose default it
// documents.
func pondPolicySchema() providers.Schema {
	return providers.Schema{
		Description: "Automatic ponds: nodes grow ponds from the sea for their queue's idle jobs and release them when it drains.",
		Attributes: map[string]*providers.Attribute{
			"enabled": {Type: cty.Bool, Optional: true,
				Description: "Turns the policy on (default true when the block is present): " + knobs.Policy + "."},
			"max_members": {Type: cty.Number, Optional: true,
				Description: knobDoc("Most members of all the node's ponds together", knobs.PolicyMaxMembers)},
			"max_ponds": {Type: cty.Number, Optional: true,
				Description: knobDoc("Most ponds at once, one per group of alike jobs", knobs.PolicyMaxPonds)},
			"query_interval": {Type: cty.String, Optional: true,
				Description: knobDoc("Least time between two tree queries, the maximum query rate", knobs.PolicyQueryInterval)},
			"grace": {Type: cty.String, Optional: true,
				Description: knobDoc("How long a pond's jobs must be gone from the queue before its members are released", knobs.PolicyGrace)},
			"check_interval": {Type: cty.String, Optional: true,
				Description: knobDoc("How often the queue is examined", knobs.PolicyCheckInterval)},
			"negotiator_min_interval": {Type: cty.String, Optional: true,
				Description: knobDoc("NEGOTIATOR_MIN_INTERVAL while a pond exists", knobs.PolicyNegotiatorMinInterval)},
			"requirements": {Type: cty.String, Optional: true,
				Description: knobDoc("ClassAd expression every candidate must also satisfy", knobs.PolicyRequirements)},
		},
	}
}

// knobDoc describes an argument that sets knob: what it does, the knob's
// default and its name.
func knobDoc(what, knob string) string {
	if k, ok := knobs.Lookup(knob); ok && k.Default != "" {
		return what + " (default " + k.Default + "): " + knob + "."
	}
	return what + ": " + knob + "."
}
