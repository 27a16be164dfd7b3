// Package glidein is the planner's side of glideins: a provider for each
// kind of site (overlay/glidein/kinds: "slurm", "ssh", "aws"), named after
// it, whose resource type "glidein" keeps a number of `pondctl agent`
// processes running on a site (a Slurm cluster, a list of SSH hosts, EC2)
// as glideins that join a pool, each with a short-lived credential of its
// own.
//
// A site is driven only through overlay/glidein's Site. Every glidein is
// submitted exactly once: its ID is recorded in a journal under
// WORKDIR/.pond/glidein, synced to disk, before Site.Submit is called, and
// every apply, refresh and destroy reconciles the journal with what the
// site lists under the resource's ID prefix. A submission the journal
// records but the site never got is sent again with the same ID once a
// grace period has passed; a glidein the site has but the journal lacks
// (pondctl killed between Submit and recording it, or the journal lost)
// is adopted; glideins that ended are replaced to keep the resource's
// count. See docs/glideins.md.
package glidein

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/overlay/api"
	site "github.com/pond-htc/pond/overlay/glidein"
	"github.com/pond-htc/pond/providers"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
	ctyjson "github.com/zclconf/go-cty/cty/json"
)

// ResourceType is the type of the resource the glidein providers manage.
const ResourceType = "glidein"

// Defaults of the provider block.
const (
	defaultSubmitGrace  = 30 * time.Second
	defaultStartTimeout = 2 * time.Minute
	// credentialMargin is added to a glidein's lifetime for its token and
	// certificate: the time it may wait in the site's queue.
	credentialMargin = time.Hour
	// drainMargin is added to a glidein's lifetime for the site's time
	// limit: the glidein drains within it after its lifetime ends.
	drainMargin = 10 * time.Minute
	// cancelTimeout bounds how long destroy waits for the site to show
	// the glideins it cancelled as ended.
	cancelTimeout = 2 * time.Minute
)

// Factory returns the factory of the provider of kind k, whose name is
// the kind's: its provider block is the kind's (beside the arguments
// every glidein provider has), and its site the one the kind's New makes
// of the block.
func Factory(k site.Kind) providers.Factory {
	return func() providers.Provider {
		return &Provider{kind: k.Name, k: k, logger: slog.New(slog.DiscardHandler)}
	}
}

// Provider is a glidein provider. Create it with Factory.
type Provider struct {
	kind   string // k.Name
	k      site.Kind
	site   site.Site
	logger *slog.Logger

	workDir string
	root    string // WORKDIR/.pond/glidein
	journal journal

	bin      string
	bindAddr string
	// bindSet says whether bind_address was given (else it is 0.0.0.0,
	// which gossipOf may narrow to loopback).
	bindSet bool
	// cmAddress is central_manager_address: where the glideins reach the
	// pool's central manager (reachOf), "" for the pool's own address.
	cmAddress    string
	profile      string
	encrypt      string
	credLife     time.Duration // 0: lifetime + credentialMargin
	submitGrace  time.Duration
	startTimeout time.Duration
	// budget caps all the provider's glideins together (budget.go).
	budget budget

	authMu sync.Mutex
	auth   *auth.Authority
	tls    providers.SeaTLS

	// locks holds one mutex per ID prefix.
	locks sync.Map
	// lineages holds the state lineage of each ID prefix (useLineage).
	lineages sync.Map
	// checked is the result of the site's Check, made once per run.
	checked func() error
}

// checkSite runs the site's Check once per run (the first plan of a
// glidein): a partition, account or host the site cannot use is an error
// of the plan, before anything is submitted.
func (p *Provider) checkSite(ctx context.Context) error {
	if p.site == nil {
		return nil
	}
	p.authMu.Lock()
	if p.checked == nil {
		s := p.site
		p.checked = sync.OnceValue(func() error {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer cancel()
			if err := s.Check(cctx); err != nil {
				return fmt.Errorf("the %s site cannot take glideins: %w", p.kind, err)
			}
			return nil
		})
	}
	check := p.checked
	p.authMu.Unlock()
	return check()
}

// Schema implements providers.Provider.
func (p *Provider) Schema() *providers.ProviderSchema { return providerSchema(p.k) }

// Close implements providers.Provider: it closes the site when the site
// holds resources (io.Closer: the SSH site's connections). Glideins keep
// running.
func (p *Provider) Close() error {
	if c, ok := p.site.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// Configure implements providers.Provider.
func (p *Provider) Configure(ctx context.Context, req providers.ConfigureRequest) providers.ConfigureResponse {
	return providers.ConfigureResponse{Diagnostics: configDiagnostics(p.configure(ctx, req))}
}

func (p *Provider) configure(ctx context.Context, req providers.ConfigureRequest) error {
	if req.Logger != nil {
		p.logger = req.Logger
	}
	c := req.Config
	p.bin = getString(c, "binary")
	if p.bin == "" {
		p.bin = os.Getenv("POND_BIN")
	}
	if p.bin == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("%s provider: binary: no POND_BIN and %w", p.kind, err)
		}
		p.bin = exe
	}
	if _, err := os.Stat(p.bin); err != nil {
		return fmt.Errorf("%s provider: binary: %w", p.kind, err)
	}
	p.bindAddr = getString(c, "bind_address")
	p.bindSet = p.bindAddr != ""
	if p.bindAddr == "" {
		p.bindAddr = "0.0.0.0"
	}
	if net.ParseIP(p.bindAddr) == nil {
		return fmt.Errorf("%s provider: bind_address %q is not an IP address", p.kind, p.bindAddr)
	}
	p.cmAddress = getString(c, "central_manager_address")
	if p.cmAddress != "" {
		if err := parseReachOverride(p.cmAddress); err != nil {
			return fmt.Errorf("%s provider: %w", p.kind, err)
		}
	}
	p.profile = getString(c, "gossip_profile")
	if p.profile == "" {
		p.profile = "lan"
	}
	okProfile := false
	for _, x := range api.GossipProfiles {
		okProfile = okProfile || x == p.profile
	}
	if !okProfile {
		return fmt.Errorf("%s provider: gossip_profile %q: want one of %s", p.kind, p.profile, strings.Join(api.GossipProfiles, ", "))
	}
	p.encrypt = getString(c, "encrypt")
	if p.encrypt != "" {
		if _, err := api.ParseGossipKey(p.encrypt); err != nil {
			return fmt.Errorf("%s provider: encrypt: %w", p.kind, err)
		}
	}
	var err error
	for _, d := range []struct {
		name  string
		to    *time.Duration
		def   time.Duration
		least time.Duration
	}{
		{"credential_lifetime", &p.credLife, 0, time.Minute},
		{"submit_grace", &p.submitGrace, defaultSubmitGrace, 0},
		{"start_timeout", &p.startTimeout, defaultStartTimeout, 0},
	} {
		if *d.to, err = durationAttr(c, d.name, d.def, d.least); err != nil {
			return fmt.Errorf("%s provider: %w", p.kind, err)
		}
	}
	if p.budget, err = budgetOf(c); err != nil {
		return fmt.Errorf("%s provider: %w", p.kind, err)
	}
	if req.WorkDir == "" {
		return fmt.Errorf("%s provider: no working directory", p.kind)
	}
	if p.workDir, err = filepath.Abs(req.WorkDir); err != nil {
		return fmt.Errorf("%s provider: %w", p.kind, err)
	}
	p.root = filepath.Join(p.workDir, ".pond", "glidein")
	p.journal = journal{dir: filepath.Join(p.root, "journal")}
	if p.k.New == nil {
		return fmt.Errorf("%s provider: this pondctl is built without the %s site", p.kind, p.kind)
	}
	settings, err := kindSettings(p.k.Provider, c)
	if err != nil {
		return fmt.Errorf("%s provider: %w", p.kind, err)
	}
	// What the site's SDK logs (EC2's) goes to pondctl's logger
	// (POND_LOG), never straight to the terminal.
	s, err := p.k.New(ctx, settings, site.KindEnv{Logger: p.logger, Binary: p.bin})
	if err != nil {
		return fmt.Errorf("%s provider: %w", p.kind, err)
	}
	p.site = s
	return nil
}

// kindSettings is what a kind's New is given of the provider block c:
// the arguments and nested blocks of b, as a JSON object, a value not
// known yet as null.
func kindSettings(b site.Block, c cty.Value) (json.RawMessage, error) {
	vals := map[string]cty.Value{}
	for n, a := range b.Settings {
		vals[n] = known(getAttr(c, n), a.Type)
	}
	for n, nb := range b.Blocks {
		ty := schemaOf(nb.Block).ImpliedType()
		if nb.List {
			ty = cty.List(ty)
		}
		vals[n] = known(getAttr(c, n), ty)
	}
	obj := cty.ObjectVal(vals)
	data, err := ctyjson.Marshal(obj, obj.Type())
	if err != nil {
		return nil, fmt.Errorf("the provider block's settings: %w", err)
	}
	return data, nil
}

// known is v converted to ty, with what is not known yet null.
func known(v cty.Value, ty cty.Type) cty.Value {
	if v.IsNull() || !v.IsKnown() {
		return cty.NullVal(ty)
	}
	v, _ = cty.Transform(v, func(_ cty.Path, x cty.Value) (cty.Value, error) {
		if !x.IsKnown() {
			return cty.NullVal(x.Type()), nil
		}
		return x, nil
	})
	if cv, err := convert.Convert(v, ty); err == nil {
		return cv
	}
	return cty.NullVal(ty)
}

// ReadDataSource implements providers.Provider; glidein providers have no
// data sources.
func (p *Provider) ReadDataSource(ctx context.Context, req providers.ReadDataRequest) providers.ReadDataResponse {
	return providers.ReadDataResponse{Diagnostics: providers.FromError(fmt.Errorf("%s provider: no data source %q", p.kind, req.TypeName))}
}

func (p *Provider) lock(prefix string) func() {
	m, _ := p.locks.LoadOrStore(prefix, &sync.Mutex{})
	mu := m.(*sync.Mutex)
	mu.Lock()
	return mu.Unlock
}

// prefixFor is the ID prefix of the glideins of the resource instance at
// address: IDPrefix, the working directory's key, a hash of the address
// and its readable name, each followed by '-'.
func (p *Provider) prefixFor(address string) (string, error) {
	key, err := ownerKey(p.root)
	if err != nil {
		return "", fmt.Errorf("the working directory's glidein key: %w", err)
	}
	sum := sha256.Sum256([]byte(address))
	return site.IDPrefix + key + "-" + hex.EncodeToString(sum[:3]) + "-" + ResourceName(address) + "-", nil
}

// newID returns a new ID for the glidein of index under prefix.
func newID(prefix string, index int) string {
	return prefix + strconv.Itoa(index) + "-" + randomText(6)
}

// indexOf returns the index an ID under prefix carries, or -1.
func indexOf(prefix, id string) int {
	rest, ok := strings.CutPrefix(id, prefix)
	if !ok {
		return -1
	}
	s, _, _ := strings.Cut(rest, "-")
	i, err := strconv.Atoi(s)
	if err != nil || i < 0 || i > maxNodes {
		return -1
	}
	return i
}

// validID reports whether s may be a glidein ID or ID prefix: IDPrefix,
// then letters, digits and '-', at most 64 characters.
func validID(s string) bool {
	if !strings.HasPrefix(s, site.IDPrefix) || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !(r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// authority opens the sea's authority, as the local provider does
// (auth.FindAuthorityDir), making it the first time.
func (p *Provider) authority() (*auth.Authority, error) {
	p.authMu.Lock()
	defer p.authMu.Unlock()
	if p.auth != nil {
		return p.auth, nil
	}
	a, err := providers.OpenAuthority(p.workDir)
	if err != nil {
		return nil, err
	}
	p.auth = a
	return a, nil
}

// client returns a client of the agent API at addr, presenting a
// short-lived token of the authority that may read the sea.
func (p *Provider) client(addr string) (*api.Client, error) {
	a, err := p.authority()
	if err != nil {
		return nil, err
	}
	tok, err := a.Mint("pondctl", []auth.Scope{auth.SeaRead}, 5*time.Minute)
	if err != nil {
		return nil, err
	}
	return api.NewClient(addr).WithTLS(p.tls.Config(p.workDir)).WithToken(tok), nil
}

// poolInfo is what a glidein needs to know of the pool it joins.
type poolInfo struct {
	name      string // the pool's name (-pool)
	cm        string // the central manager's API address, as the pool gives it
	gossip    string // the central manager's gossip address
	encrypted bool   // whether the pool's gossip is encrypted
	// reach and join are where the glideins reach the central manager's
	// API (-condor-host) and gossip (-join): see reachOf.
	reach, join string

	// How the glideins gossip (gossipOf): their key, none for gossip
	// in the clear, and the address they bind.
	key, bind string
}

// lookupPool asks the central manager at cm for the pool's name and its
// gossip address.
func (p *Provider) lookupPool(ctx context.Context, cm string) (poolInfo, error) {
	c, err := p.client(cm)
	if err != nil {
		return poolInfo{}, err
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	self, err := c.Self(cctx)
	if err != nil {
		return poolInfo{}, fmt.Errorf("the pool's central manager at %s: %w", cm, err)
	}
	if self.Pool == "" {
		return poolInfo{}, fmt.Errorf("the agent at %s belongs to no pool: pool must be a pool's central_manager", cm)
	}
	if self.Role != api.RoleCM {
		return poolInfo{}, fmt.Errorf("the agent at %s (%s) is not the central manager of pool %s: pool must be a pool's central_manager", cm, self.Name, self.Pool)
	}
	pool := poolInfo{name: self.Pool, cm: cm, gossip: self.Gossip, encrypted: self.Encrypted}
	if pool.key, pool.bind, err = p.gossipOf(pool); err != nil {
		return poolInfo{}, err
	}
	if pool.reach, pool.join, err = reachOf(pool.cm, pool.gossip, p.cmAddress); err != nil {
		return poolInfo{}, err
	}
	if err := p.checkReach(pool.reach, pool.join, pool.bind); err != nil {
		return poolInfo{}, err
	}
	return pool, nil
}

// gossipOf decides how the glideins of pool gossip, the same way as the
// pool's agents, since they gossip with them:
//
//   - with encrypt, when the provider has it (the pool must be encrypted
//     too, with the same key);
//   - else, when the pool's gossip is encrypted, with the working
//     directory's sea key (providers.SeaKey), the one the local provider
//     encrypts a pool with when it has no encrypt of its own;
//   - else in the clear, as the pool, which listens on loopback only (so
//     only glideins of this machine reach it): allowed on loopback only,
//     so the glideins bind the loopback address of the pool's family
//     unless bind_address says otherwise, which is then an error.
func (p *Provider) gossipOf(pool poolInfo) (key, bind string, err error) {
	bind = p.bindAddr
	if lo, ok := loopbackGossip(pool); ok && !p.bindSet {
		// A pool that gossips on loopback is reached from this machine
		// only: its glideins bind loopback too, encrypted or not.
		bind = lo
	}
	switch {
	case p.encrypt != "" && !pool.encrypted:
		return "", "", fmt.Errorf("encrypt is set, but the pool's central manager at %s gossips unencrypted: its glideins could not join it; give the pool's provider the same encrypt, or neither", pool.cm)
	case p.encrypt != "":
		return p.encrypt, bind, nil
	case pool.encrypted:
		key, err := providers.ReadSeaKey(p.workDir)
		if errors.Is(err, fs.ErrNotExist) {
			return "", "", fmt.Errorf("the pool's central manager at %s gossips encrypted, with a key this working directory does not have (no sea key %s): set encrypt to the pool's key", pool.cm, providers.SeaKeyPath(p.workDir))
		}
		if err != nil {
			return "", "", err
		}
		return key, bind, nil
	case api.IsLoopback(bind):
		return "", bind, nil
	case p.bindSet:
		return "", "", fmt.Errorf("bind_address %q: the pool's central manager at %s gossips unencrypted (it listens on loopback only), so its glideins may only gossip on loopback too; give the pool's provider a bind_address other hosts reach (its agents and the glideins then gossip encrypted with the working directory's sea key), or this one a loopback bind_address", p.bindAddr, pool.cm)
	}
	return "", "127.0.0.1", nil
}

// loopbackGossip returns the loopback address the pool's central manager
// gossips on, if it gossips on one.
func loopbackGossip(pool poolInfo) (string, bool) {
	h, _, err := net.SplitHostPort(pool.gossip)
	if err != nil {
		return "", false
	}
	if ip := net.ParseIP(h); ip != nil && ip.IsLoopback() {
		return ip.String(), true
	}
	return "", false
}

var errNoSite = errors.New("the provider is not configured")
