// Package local is pond's embedded default provider. Its pool resource
// runs each node as a "pondctl agent" process on this machine, detached so
// that it outlives pondctl, with everything it owns under
// WORKDIR/.pond/local: one data directory per node (agent.log, condor_config,
// serf snapshot) and a process journal that lets any later run adopt live
// nodes and reap the ones a crashed run left behind. Every agent it starts
// trusts the working directory's authority (WORKDIR/.pond/auth, made the
// first time) and holds a token of its own the authority issued (node.token
// in its data directory, mode 0600, for subject node/NAME): its API and its
// daemons accept only the authority's tokens, so that pools of different
// working directories cannot use one another.
package local

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/big"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pond-htc/pond/condor/auth"

	"github.com/hashicorp/hcl/v2"
	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/knobs"
	"github.com/pond-htc/pond/providers"
	"github.com/zclconf/go-cty/cty"
)

// Timeouts of the provider's waits. An agent that exits is told at once;
// one alive is given readyTimeout to answer: on a small machine, the last
// of a hundred agents of a hundred slots each, started while the others
// take their place in the pool, has taken more than 20 s.
const (
	readyTimeout   = 60 * time.Second
	membersTimeout = 30 * time.Second
	stopTimeout    = 10 * time.Second
)

// Default limits, which stop a configuration from starting more agents
// than one machine runs: max_nodes counts the nodes of all the provider's
// pools together, max_slots_per_node the slots of each node. The provider
// block's max_nodes and max_slots_per_node change them.
const (
	DefaultMaxNodes        = 64
	DefaultMaxSlotsPerNode = 256
)

// Provider is the local provider. Create it with New.
type Provider struct {
	// now is the clock credentials' renewal is judged by (time.Now).
	now      func() time.Time
	bin      string
	bindAddr string
	profile  string
	encrypt  string
	maxNodes int
	maxSlots int
	root     string
	workDir  string
	seaAddr  string
	logger   *slog.Logger
	journal  journal
	// gossipKey gives the agents' gossip key: encrypt, else the working
	// directory's sea key (providers.SeaKey), whatever the bind_address.
	gossipKey func() (string, error)
	// nodeTLSMu guards nodeTLSCfg: the TLS of nodeClient by node name,
	// made from nodeTLSBase (the provider's clientTLS).
	nodeTLSMu   sync.Mutex
	nodeTLSCfg  map[string]*tls.Config
	nodeTLSBase *tls.Config
	// hashKey gives the key of the hashes of secret knobs.
	hashKey func() ([]byte, error)

	// seedMu serialises finding the sea and starting a pool's first node,
	// so that pools created in parallel join one gossip.
	seedMu sync.Mutex
	// tokenLife is how long the nodes' tokens last (node_token_lifetime).
	tokenLife time.Duration
	// authMu guards auth, the working directory's authority, opened once,
	// and the provider's own token.
	// tok, valid until tokExpires, is what the provider presents to its
	// agents (client).
	authMu     sync.Mutex
	auth       *auth.Authority
	tok        string
	tokExpires time.Time
	// poolMu holds one lock per pool name.
	poolMu sync.Map

	// tls is the TLS agents are called with.
	tls providers.SeaTLS
	// factoryPools are the pools whose central manager is given the
	// pilot factory's delegated key and CA (see factoryArgs).
	factoryPools map[string]bool
}

// New returns an unconfigured local provider; it is a providers.Factory.
func New() providers.Provider { return &Provider{logger: slog.New(slog.DiscardHandler), now: time.Now} }

var _ providers.Factory = New

// Schema implements providers.Provider.
func (p *Provider) Schema() *providers.ProviderSchema { return providerSchema() }

// Configure implements providers.Provider.
func (p *Provider) Configure(ctx context.Context, req providers.ConfigureRequest) providers.ConfigureResponse {
	return providers.ConfigureResponse{Diagnostics: providers.FromError(p.configure(req))}
}

func (p *Provider) configure(req providers.ConfigureRequest) error {
	if req.Logger != nil {
		p.logger = req.Logger
	}
	p.factoryPools = map[string]bool{}
	for _, pool := range req.FactoryPools {
		p.factoryPools[pool] = true
	}
	get := func(name string) string {
		if req.Config.IsNull() || !req.Config.IsKnown() || !req.Config.Type().IsObjectType() ||
			!req.Config.Type().HasAttribute(name) {
			return ""
		}
		v := req.Config.GetAttr(name)
		if v.IsNull() || !v.IsKnown() || v.Type() != cty.String {
			return ""
		}
		return v.AsString()
	}
	p.bin = get("binary")
	if p.bin == "" {
		p.bin = os.Getenv("POND_BIN")
	}
	if p.bin == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("local provider: binary: no POND_BIN and %w", err)
		}
		p.bin = exe
	}
	if _, err := os.Stat(p.bin); err != nil {
		return fmt.Errorf("local provider: binary: %w", err)
	}
	p.bindAddr = get("bind_address")
	if p.bindAddr == "" {
		p.bindAddr = "127.0.0.1"
	}
	p.profile = get("gossip_profile")
	if p.profile == "" {
		p.profile = "local"
	}
	if !validProfile(p.profile) {
		return fmt.Errorf("local provider: gossip_profile %q: want lan, wan, local or fast", p.profile)
	}
	p.encrypt = get("encrypt")
	if p.encrypt != "" {
		if _, err := api.ParseGossipKey(p.encrypt); err != nil {
			return fmt.Errorf("local provider: encrypt: %w", err)
		}
	}
	var err error
	if p.maxNodes, err = intAttr(req.Config, "max_nodes", DefaultMaxNodes); err != nil {
		return fmt.Errorf("local provider: %w", err)
	}
	if p.maxSlots, err = intAttr(req.Config, "max_slots_per_node", DefaultMaxSlotsPerNode); err != nil {
		return fmt.Errorf("local provider: %w", err)
	}
	if p.maxNodes < 1 || p.maxSlots < 1 {
		return fmt.Errorf("local provider: max_nodes and max_slots_per_node must be at least 1, got %d and %d", p.maxNodes, p.maxSlots)
	}
	p.tokenLife = DefaultNodeTokenLifetime
	if s := get("node_token_lifetime"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < time.Minute {
			return fmt.Errorf("local provider: node_token_lifetime %q: want a duration of at least a minute, such as \"720h\"", s)
		}
		p.tokenLife = d
	}
	if req.WorkDir == "" {
		return errors.New("local provider: no working directory")
	}
	wd, err := filepath.Abs(req.WorkDir)
	if err != nil {
		return fmt.Errorf("local provider: %w", err)
	}
	p.workDir = wd
	p.root = filepath.Join(wd, ".pond", "local")
	p.journal = journal{dir: filepath.Join(p.root, "journal")}
	p.seaAddr = req.SeaAddr
	p.gossipKey = sync.OnceValues(func() (string, error) {
		if p.encrypt != "" {
			return p.encrypt, nil
		}
		// The agents gossip encrypted, with the working directory's sea
		// key when the configuration gives no key: on loopback too, where
		// every user of the host reaches the gossip port and could
		// otherwise join the sea and set tags its members act on.
		key, err := providers.SeaKey(wd)
		if err != nil {
			return "", fmt.Errorf("local provider: no encrypt, and %w", err)
		}
		return key, nil
	})
	p.hashKey = req.HashKey
	if p.hashKey == nil {
		p.hashKey = sync.OnceValues(func() ([]byte, error) { return providers.HashKey(wd) })
	}
	return nil
}

func validProfile(s string) bool {
	for _, x := range api.GossipProfiles {
		if s == x {
			return true
		}
	}
	return false
}

// Close implements providers.Provider. Nodes keep running.
func (p *Provider) Close() error { return nil }

// ReadDataSource implements providers.Provider; the local provider has no
// data sources.
func (p *Provider) ReadDataSource(ctx context.Context, req providers.ReadDataRequest) providers.ReadDataResponse {
	return providers.ReadDataResponse{Diagnostics: providers.FromError(fmt.Errorf("local provider: no data source %q", req.TypeName))}
}

func (p *Provider) lockPool(name string) func() {
	m, _ := p.poolMu.LoadOrStore(name, &sync.Mutex{})
	mu := m.(*sync.Mutex)
	mu.Lock()
	return mu.Unlock
}

// PoolName derives a pool's name from its instance address: pool.campus is
// "campus", pool.w["a"] is "w-a", pool.w[1] is "w-1", module.m.pool.x is
// "m-x". Node i of the pool is named NAME-i.
func PoolName(address string) string {
	s := strings.ReplaceAll(address, "module.", "")
	if i := strings.LastIndex(s, "pool."); i == 0 || (i > 0 && s[i-1] == '.') {
		s = s[:i] + s[i+len("pool."):]
	}
	var b strings.Builder
	dash := false
	for _, r := range s {
		ok := r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
		if ok {
			b.WriteRune(r)
			dash = false
		} else if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
	}
	return strings.TrimRight(b.String(), "-")
}

// launchParallelism is how many agents a pool starts at once.
func launchParallelism() int { return max(4, 4*runtime.NumCPU()) }

func nodeName(pool string, i int) string { return fmt.Sprintf("%s-%d", pool, i) }

// spec is what a pool's configuration says about each node.
type spec struct {
	Nodes int  `json:"-"`
	Slots int  `json:"slots"`
	Free  bool `json:"free"`
	// Reach is how the workers (every node but the central manager) are
	// reached: "" (auto), "auto", "direct" or "relay".
	Reach string `json:"reach,omitempty"`
	// Replicas is how many members keep a replica of the central
	// manager's state (POND_CM_REPLICAS); 0 for no fail-over.
	Replicas int               `json:"replicas,omitempty"`
	Attrs    []string          `json:"attrs"`
	Knobs    map[string]string `json:"knobs"`
	// Policy are the POND_POLICY_* knobs of the pond_policy block.
	Policy map[string]string `json:"policy,omitempty"`
	// LendersFirst is lenders_first (POND_LENDERS_FIRST), nil when not
	// set.
	LendersFirst *bool `json:"lenders_first,omitempty"`
	// Secret names the knobs of Knobs whose values come from sensitive
	// ones: the journal keeps their keyed hash (see recorded), and the
	// node's configuration file names them in POND_SECRET_KNOBS so that
	// the agent never shows them.
	Secret []string `json:"secret,omitempty"`
}

func (s spec) hash() string {
	data, _ := json.Marshal(s)
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:8])
}

func getAttr(v cty.Value, name string) cty.Value {
	if v.IsNull() || !v.IsKnown() || !v.Type().IsObjectType() || !v.Type().HasAttribute(name) {
		return cty.NullVal(cty.DynamicPseudoType)
	}
	return v.GetAttr(name)
}

func intAttr(v cty.Value, name string, def int) (int, error) {
	a := getAttr(v, name)
	if a.IsNull() {
		return def, nil
	}
	if !a.IsKnown() {
		return 0, fmt.Errorf("%s is not known", name)
	}
	bf := a.AsBigFloat()
	if !bf.IsInt() {
		return 0, fmt.Errorf("%s: %s is not a whole number", name, bf.Text('g', -1))
	}
	i, acc := bf.Int64()
	if acc != big.Exact || i > 1<<20 || i < -1<<20 {
		return 0, fmt.Errorf("%s: %s is out of range", name, bf.Text('g', -1))
	}
	return int(i), nil
}

func knobsOf(v cty.Value) (map[string]string, error) {
	out := map[string]string{}
	if v.IsNull() {
		return out, nil
	}
	if !v.IsWhollyKnown() {
		return nil, errors.New("config: not known")
	}
	for it := v.ElementIterator(); it.Next(); {
		k, ev := it.Element()
		name := k.AsString()
		if !validKnob(name) {
			return nil, fmt.Errorf("config: %q is not a valid HTCondor configuration name", name)
		}
		if ev.IsNull() {
			continue
		}
		if strings.ContainsAny(ev.AsString(), "\r\n") {
			return nil, fmt.Errorf("config.%s: value must be a single line", name)
		}
		out[name] = ev.AsString()
	}
	return out, nil
}

func validKnob(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r == '_' || r == '.' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// specOf reads a pool's node spec from a known configuration or plan.
func specOf(v cty.Value) (spec, error) {
	var s spec
	var err error
	if s.Nodes, err = intAttr(v, "nodes", 1); err != nil {
		return s, err
	}
	if s.Slots, err = intAttr(v, "slots", 1); err != nil {
		return s, err
	}
	if f := getAttr(v, "free"); !f.IsNull() && f.IsKnown() {
		s.Free = f.True()
	}
	if s.Reach, err = reachOf(v); err != nil {
		return s, err
	}
	if s.Replicas, err = replicasOf(v); err != nil {
		return s, err
	}
	if s.Attrs, err = providers.AttrArgs(getAttr(v, "attributes"), "attributes"); err != nil {
		return s, err
	}
	if s.Knobs, err = knobsOf(getAttr(v, "config")); err != nil {
		return s, err
	}
	if s.Policy, err = policyKnobs(getAttr(v, "pond_policy")); err != nil {
		return s, err
	}
	if lf := getAttr(v, "lenders_first"); !lf.IsNull() && lf.IsKnown() {
		b := lf.True()
		s.LendersFirst = &b
	}
	return s, nil
}

// replicasOf reads the pool's replicas: 0 when it is not set or not known
// yet. A pool keeps at most one replica per node other than its central
// manager, and a free pool none.
func replicasOf(v cty.Value) (int, error) {
	if r := getAttr(v, "replicas"); r.IsNull() || !r.IsKnown() {
		return 0, nil
	}
	n, err := intAttr(v, "replicas", 0)
	if err != nil {
		return 0, err
	}
	nodes := -1
	if a := getAttr(v, "nodes"); a.IsNull() {
		nodes = 1
	} else if a.IsKnown() {
		if nodes, err = intAttr(v, "nodes", 1); err != nil {
			return 0, err
		}
	}
	f := getAttr(v, "free")
	switch {
	case n < 0:
		return 0, fmt.Errorf("replicas = %d: want 0 or more", n)
	case n > 0 && !f.IsNull() && f.IsKnown() && f.True():
		return 0, fmt.Errorf("replicas = %d: a free pool has no central manager to replicate", n)
	case n > 0 && nodes >= 0 && n >= nodes:
		return 0, fmt.Errorf("replicas = %d: the pool has %d nodes, so at most %d other than its central manager can be replicas", n, nodes, nodes-1)
	}
	return n, nil
}

// reachOf reads the pool's reach: "" when it is not set.
func reachOf(v cty.Value) (string, error) {
	r := getAttr(v, "reach")
	if r.IsNull() || !r.IsKnown() {
		return "", nil
	}
	switch reach := r.AsString(); reach {
	case "auto", "direct", "relay", "reverse":
		if f := getAttr(v, "free"); sameReach(reach, "relay") && !f.IsNull() && f.IsKnown() && f.True() {
			return "", fmt.Errorf("reach = %q: the workers of a free pool have no central manager to relay through", reach)
		}
		return reach, nil
	default:
		return "", fmt.Errorf("reach = %q: want auto, direct or relay (or its synonym reverse)", reach)
	}
}

// sameReach reports whether two values of a pool's reach mean the same:
// "reverse", the name the sea shows for a worker reached through its
// relay, is a synonym of "relay".
func sameReach(a, b string) bool {
	norm := func(s string) string {
		if s == "reverse" {
			return "relay"
		}
		return s
	}
	return norm(a) == norm(b)
}

// policyKnobs maps the pond_policy block to the POND_POLICY_* knobs of
// package knobs; nil when the block is absent.
func policyKnobs(v cty.Value) (map[string]string, error) {
	if v.IsNull() {
		return nil, nil
	}
	if !v.IsWhollyKnown() {
		return nil, errors.New("pond_policy: not known")
	}
	out := map[string]string{knobs.Policy: "true"}
	if e := getAttr(v, "enabled"); !e.IsNull() && e.False() {
		out[knobs.Policy] = "false"
	}
	for _, n := range []struct{ attr, knob string }{{"max_members", knobs.PolicyMaxMembers}, {"max_ponds", knobs.PolicyMaxPonds}} {
		if getAttr(v, n.attr).IsNull() {
			continue
		}
		i, err := intAttr(v, n.attr, 0)
		if err != nil {
			return nil, fmt.Errorf("pond_policy.%w", err)
		}
		if i < 1 {
			return nil, fmt.Errorf("pond_policy.%s: must be at least 1, got %d", n.attr, i)
		}
		out[n.knob] = strconv.Itoa(i)
	}
	for _, n := range []struct{ attr, knob string }{{"query_interval", knobs.PolicyQueryInterval}, {"grace", knobs.PolicyGrace},
		{"check_interval", knobs.PolicyCheckInterval}, {"negotiator_min_interval", knobs.PolicyNegotiatorMinInterval}} {
		a := getAttr(v, n.attr)
		if a.IsNull() {
			continue
		}
		d, err := knobs.ParseDuration(a.AsString())
		if err != nil {
			return nil, fmt.Errorf("pond_policy.%s = %q: %w", n.attr, a.AsString(), err)
		}
		if n.attr == "check_interval" && d <= 0 {
			return nil, fmt.Errorf("pond_policy.check_interval: must be more than zero")
		}
		out[n.knob] = d.String()
	}
	if r := getAttr(v, "requirements"); !r.IsNull() {
		src := r.AsString()
		if strings.ContainsAny(src, "\r\n") {
			return nil, errors.New("pond_policy.requirements: must be a single line")
		}
		if _, err := classad.ParseExpr(src); err != nil {
			return nil, fmt.Errorf("pond_policy.requirements: %w", err)
		}
		out[knobs.PolicyRequirements] = src
	}
	return out, nil
}

// ValidateResourceConfig implements providers.Provider.
func (p *Provider) ValidateResourceConfig(ctx context.Context, req providers.ValidateRequest) providers.ValidateResponse {
	return providers.ValidateResponse{Diagnostics: providers.FromError(validate(req.TypeName, req.Config))}
}

func validate(typeName string, config cty.Value) error {
	if typeName != "pool" {
		return fmt.Errorf("local provider: no resource type %q", typeName)
	}
	for _, n := range []string{"nodes", "slots"} {
		a := getAttr(config, n)
		if a.IsNull() || !a.IsKnown() {
			continue
		}
		i, err := intAttr(config, n, 1)
		if err != nil {
			return providers.ArgError(n, err)
		}
		if i < 1 {
			return providers.ArgError(n, fmt.Errorf("%s: must be at least 1, got %d", n, i))
		}
	}
	if a := getAttr(config, "attributes"); a.IsWhollyKnown() {
		if _, err := providers.AttrArgs(a, "attributes"); err != nil {
			return providers.ArgError("attributes", err)
		}
	}
	if c := getAttr(config, "config"); c.IsWhollyKnown() {
		if _, err := knobsOf(c); err != nil {
			return providers.ArgError("config", err)
		}
	}
	if pp := getAttr(config, "pond_policy"); pp.IsWhollyKnown() {
		if _, err := policyKnobs(pp); err != nil {
			return providers.ArgError("pond_policy", err)
		}
	}
	if _, err := reachOf(config); err != nil {
		return providers.ArgError("reach", err)
	}
	if _, err := replicasOf(config); err != nil {
		return providers.ArgError("replicas", err)
	}
	return nil
}

// secretKnobs returns the names of the knobs of config that hold sensitive
// values, given the paths of the configuration's sensitive values, or an
// error about an argument other than config that holds one: the other
// arguments end up in the machine ad or on the agents' command line, which
// anyone may read.
func secretKnobs(config cty.Value, paths []cty.Path) ([]string, hcl.Diagnostics) {
	set := map[string]bool{}
	for _, p := range paths {
		attr, ok := cty.GetAttrStep{}, len(p) > 0
		if ok {
			attr, ok = p[0].(cty.GetAttrStep)
		}
		if !ok {
			return nil, providers.FromError(errors.New("the whole pool configuration is sensitive; only config may hold sensitive values"))
		}
		if attr.Name != "config" {
			return nil, hcl.Diagnostics{providers.AttributeError(attr.Name, fmt.Errorf("%s holds a sensitive value, which would be shown to anyone (in the machine ad or on the agents' command line); only config may hold sensitive values", attr.Name))}
		}
		if len(p) == 1 {
			// The whole map is sensitive: so is every knob.
			if cfg := getAttr(config, "config"); !cfg.IsNull() && cfg.IsWhollyKnown() {
				for it := cfg.ElementIterator(); it.Next(); {
					k, _ := it.Element()
					set[k.AsString()] = true
				}
			}
			continue
		}
		if idx, ok := p[1].(cty.IndexStep); ok && idx.Key.Type() == cty.String && idx.Key.IsKnown() && !idx.Key.IsNull() {
			set[idx.Key.AsString()] = true
		}
	}
	if len(set) == 0 {
		return nil, nil
	}
	return slices.Sorted(maps.Keys(set)), nil
}

// recorded returns s as the journal records it: the values of its secret
// knobs replaced by their keyed hash, so that a change of them is seen
// (the spec's hash differs) without the journal holding them.
func (p *Provider) recorded(s spec) (spec, error) {
	if len(s.Secret) == 0 {
		return s, nil
	}
	if p.hashKey == nil {
		return s, errors.New("secret knobs: no key to hash them with")
	}
	key, err := p.hashKey()
	if err != nil {
		return s, err
	}
	r := s
	r.Knobs = maps.Clone(s.Knobs)
	for _, k := range s.Secret {
		v, ok := r.Knobs[k]
		if !ok {
			continue
		}
		h, err := providers.Hash(key, `config["`+k+`"]`, cty.StringVal(v))
		if err != nil {
			return s, err
		}
		r.Knobs[k] = h
	}
	return r, nil
}
