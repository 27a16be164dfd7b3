package glidein

import (
	site "github.com/pond-htc/pond/overlay/glidein"
	"github.com/pond-htc/pond/providers"
	"github.com/zclconf/go-cty/cty"
)

// glideinType is the element type of a glidein resource's glideins.
var glideinType = cty.Object(map[string]cty.Type{
	"id":      cty.String,
	"site_id": cty.String,
	"host":    cty.String,
	"state":   cty.String,
})

// funnelType is the type of a glidein resource's funnel: its factory
// entry's api.Funnel, matched and wanted, and its breaker.
var funnelType = cty.Object(map[string]cty.Type{
	"requested": cty.Number, "queued": cty.Number, "running": cty.Number, "validated": cty.Number,
	"joined": cty.Number, "claimed": cty.Number, "failed": cty.Number, "lost": cty.Number, "done": cty.Number,
	"idle_jobs": cty.Number, "matched": cty.Number, "wanted": cty.Number,
	"breaker_open": cty.Bool, "breaker_reason": cty.String, "breaker_until": cty.String, "error": cty.String,
	"capped": cty.String,
})

// commonProviderAttrs are the arguments of every glidein provider block.
func commonProviderAttrs() map[string]*providers.Attribute {
	return map[string]*providers.Attribute{
		"binary": {Type: cty.String, Optional: true,
			Description: "Path of the pondctl binary the site copies to the far side (default: $POND_BIN, else this executable)."},
		"bind_address": {Type: cty.String, Optional: true,
			Description: "IP address the glideins' agents bind their gossip and API sockets to on the far side (default 0.0.0.0, or the loopback address when the pool gossips in the clear on loopback); any other than a loopback one needs encrypted gossip."},
		"central_manager_address": {Type: cty.String, Optional: true,
			Description: "Address the glideins reach the pool's central manager at, HOST or HOST:PORT (HOST alone: the central manager's port), when it is not the address the pool's central_manager names: behind NAT, or a DNS name. Default: the pool's central_manager, or, when its agent listens on every address (bind_address 0.0.0.0), the address its gossip advertises. A loopback address is refused unless the glideins run on this machine."},
		"gossip_profile": {Type: cty.String, Optional: true,
			Description: "Gossip timing profile of the glideins: lan (default), wan, local or fast."},
		"encrypt": {Type: cty.String, Optional: true, Sensitive: true,
			Description: "Base64 gossip encryption key of the sea the glideins join; it travels in their private configuration file, never on a command line. Default: the working directory's sea key (.pond/auth/gossip.key) when the pool's gossip is encrypted, none when it is in the clear."},
		"credential_lifetime": {Type: cty.String, Optional: true,
			Description: "Most a glidein's token and certificate may last (default: the glidein's lifetime plus " + credentialMargin.String() + "); plan warns when it is shorter than a glidein's lifetime."},
		"submit_grace": {Type: cty.String, Optional: true,
			Description: "How long a submission recorded in the journal but not seen on the site may still appear there (a pondctl killed while it was being sent) before it is sent again with the same ID (default " + defaultSubmitGrace.String() + ")."},
		"start_timeout": {Type: cty.String, Optional: true,
			Description: "How long apply waits for new glideins to run before it leaves them queued (default " + defaultStartTimeout.String() + "; \"0s\" does not wait)."},
	}
}

// providerBlockSchema is the provider block of kind k: the arguments
// every glidein provider has, the kind's own (which replace a common one
// of the same name), its budget when its sites have prices, and its
// nested blocks.
func providerBlockSchema(k site.Kind) *providers.Schema {
	attrs := commonProviderAttrs()
	if k.Budget {
		for n, a := range budgetAttrs("the provider's glideins together") {
			attrs[n] = a
		}
	}
	ps := schemaOf(k.Provider)
	for n, a := range ps.Attributes {
		attrs[n] = a
	}
	ps.Attributes = attrs
	return ps
}

// schemaOf is the provider schema of a kind's block.
func schemaOf(b site.Block) *providers.Schema {
	s := &providers.Schema{Description: b.Description, Attributes: map[string]*providers.Attribute{}}
	for n, a := range b.Settings {
		s.Attributes[n] = &providers.Attribute{Type: a.Type, Required: a.Required, Optional: !a.Required,
			Sensitive: a.Sensitive, Description: a.Description}
	}
	for n, nb := range b.Blocks {
		if s.BlockTypes == nil {
			s.BlockTypes = map[string]*providers.NestedBlock{}
		}
		pb := &providers.NestedBlock{Nesting: providers.NestingSingle, MaxItems: 1, Block: *schemaOf(nb.Block)}
		if nb.List {
			pb.Nesting, pb.MaxItems = providers.NestingList, 0
		}
		s.BlockTypes[n] = pb
	}
	return s
}

// glideinSchema is the glidein resource, the same for every kind of site.
func glideinSchema() *providers.Schema {
	s := &providers.Schema{
		Description: "Glideins: pondctl agents started on a site for a while, which join a pool.",
		Attributes: map[string]*providers.Attribute{
			"pool": {Type: cty.String, Required: true,
				Description: "API address of the central manager of the pool the glideins join, such as pool.campus.central_manager."},
			"nodes": {Type: cty.Number, Optional: true, Computed: true,
				Description: "How many glideins to keep queued or running (default 1); ended ones are replaced at the next apply. Not with a factory block."},
			"lifetime": {Type: cty.String, Optional: true, Computed: true,
				Description: "Most a glidein lives, draining before it ends (default " + defaultLifetime.String() + ")."},
			"idle_timeout": {Type: cty.String, Optional: true, Computed: true,
				Description: "A glidein leaves once idle this long (default " + defaultIdleTimeout.String() + "; \"0s\" never)."},
			"cm_timeout": {Type: cty.String, Optional: true, Computed: true,
				Description: "A glidein leaves once its central manager has been unreachable this long (default " + defaultCMTimeout.String() + ")."},
			"max_jobs": {Type: cty.Number, Optional: true,
				Description: "Most jobs a glidein runs: after its last has ended it leaves, and its startd takes no other job meanwhile (default 0, no limit; 1 is a glidein per job)."},
			"slots": {Type: cty.Number, Optional: true, Computed: true,
				Description: "Slots of each glidein (default 1)."},
			"cpus": {Type: cty.Number, Optional: true,
				Description: "CPUs each glidein asks of the site (default: slots); its slots advertise them divided among them (Cpus), not the machine's."},
			"memory": {Type: cty.String, Optional: true,
				Description: "Memory each glidein asks of the site, such as \"4GB\" (default: the site's); its slots advertise it divided among them (Memory), not the machine's."},
			"attributes": {Type: cty.DynamicPseudoType, Optional: true,
				Description: "Extra machine ClassAd attributes of the glideins, as an object."},
			"id": {Type: cty.String, Computed: true,
				Description: "The prefix of the IDs of the resource's glideins, which the site lists them by."},
			"ids": {Type: cty.List(cty.String), Computed: true,
				Description: "IDs of the glideins queued or running, by index."},
			"glideins": {Type: cty.List(glideinType), Computed: true,
				Description: "Every glidein of the resource the site reports: ID, the site's own ID, host and state."},
			"counts": {Type: cty.Map(cty.Number), Computed: true,
				Description: "How many glideins are in each state."},
			"entry": {Type: cty.String, Computed: true,
				Description: "With a factory block: the name of the entry installed in the pilot factory of the pool's central manager; null when the central manager no longer has it as pond installed it."},
			"funnel": {Type: funnelType, Computed: true,
				Description: "With a factory block: the entry's funnel as its factory last reported it (glideins requested, queued, running, validated, joined, claimed, failed, lost, done), the idle jobs it matched and the glideins they want, its circuit breaker: open, why and until when, and which cap of its budget (max_instances, max_hourly_cost) stopped a launch its jobs wanted (capped)."},
		},
		BlockTypes: map[string]*providers.NestedBlock{
			"factory": {Nesting: providers.NestingSingle, MaxItems: 1, Block: providers.Schema{
				Description: "Instead of nodes: the pilot factory of the pool's central manager keeps as many glideins as the pool's idle jobs need, within these limits, with no pondctl running.",
				Attributes: map[string]*providers.Attribute{
					"max_queued":           {Type: cty.Number, Required: true, Description: "Most glideins waiting at the site at once."},
					"max_running":          {Type: cty.Number, Required: true, Description: "Most glideins queued and running together."},
					"max_submit_per_cycle": {Type: cty.Number, Optional: true, Description: "Most glideins submitted in one cycle of the factory, the top of its ramp (default max_queued)."},
					"ramp":                 {Type: cty.String, Optional: true, Description: "How the submissions of a cycle grow while jobs wait: exponential (1, 2, 4, ...; default), linear (1, 2, 3, ...) or none (max_submit_per_cycle at once)."},
					"breaker_failures":     {Type: cty.Number, Optional: true, Description: "Failed glideins within breaker_window that stop the entry submitting for breaker_backoff (default 3)."},
					"breaker_window":       {Type: cty.String, Optional: true, Description: "The window failures count in (default 10m)."},
					"breaker_backoff":      {Type: cty.String, Optional: true, Description: "How long the entry submits nothing once its breaker opened (default 5m)."},
				},
			}},
			"validate": {Nesting: providers.NestingSingle, MaxItems: 1, Block: providers.Schema{
				Description: "Checks a glidein makes before it joins its pool; one that fails them reports why and exits.",
				Attributes: map[string]*providers.Attribute{
					"disk":    {Type: cty.String, Optional: true, Description: "Least free disk in the glidein's directory, such as \"10GB\"."},
					"memory":  {Type: cty.String, Optional: true, Description: "Least memory of the machine, such as \"8GB\"."},
					"command": {Type: cty.List(cty.String), Optional: true, Description: "A command (program and arguments) that must exit with status 0."},
				},
			}},
		},
	}
	for n, a := range budgetAttrs("the resource's glideins") {
		s.Attributes[n] = a
	}
	return s
}

func providerSchema(k site.Kind) *providers.ProviderSchema {
	return &providers.ProviderSchema{
		Provider:    providerBlockSchema(k),
		Resources:   map[string]*providers.Schema{ResourceType: glideinSchema()},
		DataSources: map[string]*providers.Schema{},
	}
}
