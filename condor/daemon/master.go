// Package daemon is pond's condor_master: it starts the daemons a node's
// DAEMON_LIST names (COLLECTOR, NEGOTIATOR, SCHEDD, STARTD), serves their
// endpoints under wire.PathPrefix, each behind the scope of a token HTCondor
// would ask for it (see Routes), restarts a daemon
// that fails, and applies reconfiguration at run time, notably a new
// CONDOR_HOST, which moves the startd and schedd to another central manager
// without a restart.
//
// A node agent hosts the daemons with a few lines:
//
//	m, err := daemon.Start(ctx, daemon.Options{Config: cfg, Name: name, Address: apiAddr, DataDir: dir})
//	mux.Handle(wire.PathPrefix, m.Handler())
//	...
//	m.Reconfig(newCfg) // e.g. CONDOR_HOST changed
//	m.Stop(ctx)
package daemon

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/condor/collector"
	"github.com/pond-htc/pond/condor/collector/history"
	"github.com/pond-htc/pond/condor/config"
	"github.com/pond-htc/pond/condor/internal/asuser"
	"github.com/pond-htc/pond/condor/negotiator"
	"github.com/pond-htc/pond/condor/schedd"
	"github.com/pond-htc/pond/condor/startd"
	"github.com/pond-htc/pond/condor/wire"
)

// Daemon names as DAEMON_LIST spells them.
const (
	Collector  = "COLLECTOR"
	Negotiator = "NEGOTIATOR"
	Schedd     = "SCHEDD"
	Startd     = "STARTD"
)

// Options configure a Master.
type Options struct {
	Config  *config.Config
	Name    string // node name (machine name in ads; default the host name)
	Address string // host:port where Handler is served (this node's API address)
	DataDir string // directory for the job queue and job scratch directories
	Logger  *slog.Logger
	// Attrs are extra startd machine attributes (name -> ClassAd expression
	// text), such as an agent's -attr values.
	Attrs map[string]string
	// Reload, when set, re-reads the configuration for a remote
	// condor_reconfig; without it a remote reconfig re-applies the current
	// configuration.
	Reload func() (*config.Config, error)
	// Verifier checks the tokens of the requests Handler serves: each
	// route needs a token of its scope (Routes). Without one the daemons'
	// endpoints are open to every caller, who then names its jobs' Owner.
	Verifier *auth.Verifier
	// Token gives the token the daemons present when they call other
	// daemons (a node's token, with DAEMON), read at each call so that a
	// refreshed token is used at once; nil presents none.
	Token func() string
	// Account, when set, resolves a job's Owner to the local account a
	// schedd running as root acts as for the job's files (see
	// schedd.Options.Account); by default the account of that name.
	Account func(owner string) (*asuser.Account, error)
	// FlockTargets gives the schedd the pools it may flock its idle jobs
	// to, nearest first (schedd.Options.FlockTargets); nil for none.
	FlockTargets func() []schedd.FlockTarget
	// AcceptSubmitters says whether the collector takes the submitter
	// ads of a node's schedd (collector.Options.AcceptSubmitters); nil
	// takes every node's.
	AcceptSubmitters func(node string) error
	// TLS, when set, is the sea's TLS the daemons call other nodes'
	// daemons with (condor/auth.ClientTLS with the node's certificate).
	TLS *tls.Config
	// OnQuarantine, when set, is told when the startd quarantines the
	// machine as a black hole and when the quarantine lifts (nil); see
	// startd.Options.OnQuarantine.
	OnQuarantine func(*startd.Quarantine)
	// Quarantine is the startd's quarantine from before a restart, if any:
	// startd.Options.Quarantine.
	Quarantine *startd.Quarantine
}

// Master supervises a node's daemons.
type Master struct {
	opts Options
	log  *slog.Logger
	cm   atomic.Value // string: collector (central manager) address
	// addr is the node's API address now (Options.Address, or the last
	// SetAddress).
	addr  atomic.Pointer[string]
	cfg   atomic.Pointer[config.Config]
	start time.Time

	mu      sync.Mutex
	daemons map[string]*supervised
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup

	histMu sync.Mutex
	hist   *history.Store // history.go

	// reconfigured tells advertise (configad.go) to send the master's
	// ad at once.
	reconfigured chan struct{}
}

// runner is what the master supervises.
type runner interface {
	Run(ctx context.Context) error
	Handler() http.Handler
}

type supervised struct {
	name     string
	cancel   context.CancelFunc
	done     chan struct{}
	current  atomic.Value // runner
	handler  atomic.Value // http.Handler of current
	restarts atomic.Int64
}

// Start starts the daemons of the configuration's DAEMON_LIST.
func Start(ctx context.Context, opts Options) (*Master, error) {
	if opts.Config == nil {
		opts.Config = config.New(config.Options{})
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Name == "" {
		opts.Name, _ = os.Hostname()
	}
	if opts.Address == "" {
		return nil, errors.New("daemon: Options.Address (the node's API address) is required")
	}
	if opts.DataDir == "" {
		return nil, errors.New("daemon: Options.DataDir is required")
	}
	m := &Master{opts: opts, log: opts.Logger.With("node", opts.Name), daemons: map[string]*supervised{}, start: time.Now(),
		reconfigured: make(chan struct{}, 1)}
	m.addr.Store(&opts.Address)
	m.warnPoolPassword(opts.Config)
	m.ctx, m.cancel = context.WithCancel(context.WithoutCancel(ctx))
	m.cfg.Store(opts.Config)
	m.cm.Store(m.collectorAddr(opts.Config))
	for _, d := range daemonList(opts.Config) {
		if err := m.startDaemon(ctx, d); err != nil {
			m.Stop(context.Background())
			return nil, err
		}
	}
	m.wg.Go(func() { m.advertise(m.ctx) })
	return m, nil
}

// daemonList returns the daemons of DAEMON_LIST this package runs.
func daemonList(cfg *config.Config) []string {
	var out []string
	seen := map[string]bool{}
	for _, d := range cfg.List("DAEMON_LIST") {
		d = strings.ToUpper(d)
		switch d {
		case Collector, Negotiator, Schedd, Startd:
			if !seen[d] {
				seen[d] = true
				out = append(out, d)
			}
		}
	}
	// The collector starts first, so that the others can report to it.
	order := map[string]int{Collector: 0, Negotiator: 1, Schedd: 2, Startd: 3}
	sort.Slice(out, func(i, j int) bool { return order[out[i]] < order[out[j]] })
	return out
}

// collectorAddr returns the central manager's API address: COLLECTOR_HOST
// or CONDOR_HOST when set explicitly (a port-less host gets this node's
// port), this node otherwise.
func (m *Master) collectorAddr(cfg *config.Config) string {
	for _, knob := range []string{"COLLECTOR_HOST", "CONDOR_HOST"} {
		src, ok := cfg.Source(knob)
		if !ok || src.File == "<default>" {
			continue
		}
		v, _ := cfg.Get(knob)
		v = strings.TrimSpace(v)
		v = strings.TrimSuffix(strings.TrimPrefix(v, "<"), ">")
		if v == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(v); err != nil {
			if _, port, err := net.SplitHostPort(m.Address()); err == nil {
				v = net.JoinHostPort(v, port)
			}
		}
		return v
	}
	return m.Address()
}

// CollectorAddress returns the central manager address the daemons report to.
func (m *Master) CollectorAddress() string { return m.cm.Load().(string) }

func (m *Master) collectorFunc() func() string { return m.CollectorAddress }

// build creates a fresh instance of a daemon.
func (m *Master) build(ctx context.Context, name string) (runner, error) {
	cfg := m.cfg.Load()
	switch name {
	case Collector:
		life, err := cfg.Duration("CLASSAD_LIFETIME", 900*time.Second)
		if err != nil {
			return nil, fmt.Errorf("CLASSAD_LIFETIME: %w", err)
		}
		h, err := m.history(ctx, cfg)
		if err != nil {
			return nil, fmt.Errorf("the collector's history: %w", err)
		}
		return collector.New(collector.Options{Lifetime: life, Logger: m.log, AcceptSubmitters: m.opts.AcceptSubmitters, History: h}), nil
	case Negotiator:
		return negotiator.New(negotiator.Options{Config: cfg, Name: m.opts.Name, Address: m.Address(), Token: m.opts.Token, TLS: m.opts.TLS, Collector: m.collectorFunc(),
			LocalCollector: m.localCollector, Logger: m.log})
	case Schedd:
		return schedd.New(ctx, schedd.Options{Config: cfg, Name: m.opts.Name, Address: m.Address(), DataDir: m.opts.DataDir,
			Token: m.opts.Token, TLS: m.opts.TLS, Collector: m.collectorFunc(), Logger: m.log, Account: m.opts.Account,
			FlockTargets: m.opts.FlockTargets})
	case Startd:
		return startd.New(startd.Options{Config: cfg, Name: m.opts.Name, Address: m.Address(), DataDir: m.opts.DataDir,
			Token: m.opts.Token, TLS: m.opts.TLS, Collector: m.collectorFunc(), Attrs: m.opts.Attrs, Logger: m.log,
			OnQuarantine: m.opts.OnQuarantine, Quarantine: m.opts.Quarantine})
	}
	return nil, fmt.Errorf("daemon: unknown daemon %q", name)
}

// startDaemon builds a daemon and supervises it: when its Run fails or
// panics, it is rebuilt and restarted after a back-off.
func (m *Master) startDaemon(ctx context.Context, name string) error {
	r, err := m.build(ctx, name)
	if err != nil {
		return fmt.Errorf("daemon: starting %s: %w", name, err)
	}
	dctx, cancel := context.WithCancel(m.ctx)
	s := &supervised{name: name, cancel: cancel, done: make(chan struct{})}
	s.current.Store(r)
	s.handler.Store(r.Handler())
	m.mu.Lock()
	m.daemons[name] = s
	m.mu.Unlock()
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		defer close(s.done)
		backoff := time.Second
		for {
			err := runSafely(dctx, r)
			closeRunner(r)
			if dctx.Err() != nil {
				return
			}
			s.restarts.Add(1)
			m.log.Error("daemon exited; restarting", "daemon", name, "err", err, "in", backoff)
			select {
			case <-dctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(backoff*2, time.Minute)
			nr, berr := m.build(dctx, name)
			if berr != nil {
				m.log.Error("rebuilding daemon", "daemon", name, "err", berr)
				continue
			}
			r = nr
			s.current.Store(r)
			s.handler.Store(r.Handler())
		}
	}()
	return nil
}

func runSafely(ctx context.Context, r runner) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	if err := r.Run(ctx); err != nil {
		return err
	}
	if ctx.Err() == nil {
		return errors.New("exited")
	}
	return nil
}

func closeRunner(r runner) {
	if c, ok := r.(interface{ Close() error }); ok {
		_ = c.Close()
	}
}

// Daemons returns the names of the running daemons.
func (m *Master) Daemons() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for n := range m.daemons {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Restarts returns how many times the named daemon has been restarted.
func (m *Master) Restarts(name string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s := m.daemons[name]; s != nil {
		return int(s.restarts.Load())
	}
	return 0
}

// running returns the current instance of a daemon, or nil.
func (m *Master) running(name string) runner {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s := m.daemons[name]; s != nil {
		r, _ := s.current.Load().(runner)
		return r
	}
	return nil
}

// Collector returns the running collector, or nil.
func (m *Master) Collector() *collector.Collector {
	c, _ := m.running(Collector).(*collector.Collector)
	return c
}

// localCollector returns the running collector when addr is this node's
// address, for the negotiator to query without the wire; nil otherwise.
func (m *Master) localCollector(addr string) negotiator.Querier {
	if addr != m.Address() {
		return nil
	}
	if c := m.Collector(); c != nil {
		return c
	}
	return nil
}

// Negotiator returns the running negotiator, or nil.
func (m *Master) Negotiator() *negotiator.Negotiator {
	n, _ := m.running(Negotiator).(*negotiator.Negotiator)
	return n
}

// Schedd returns the running schedd, or nil.
func (m *Master) Schedd() *schedd.Schedd {
	s, _ := m.running(Schedd).(*schedd.Schedd)
	return s
}

// Startd returns the running startd, or nil.
func (m *Master) Startd() *startd.Startd {
	s, _ := m.running(Startd).(*startd.Startd)
	return s
}

// Address is the node's API address, which its daemons advertise.
func (m *Master) Address() string { return *m.addr.Load() }

// SetAddress changes the node's API address at run time (a worker whose
// relay gave it another API port, overlay/relay): the startd advertises
// the new one and names it in its job reports, from which the schedds
// that run jobs there follow it (schedd.Schedd.JobReport), and daemons
// started later are given it. A schedd on the node keeps the address it
// started with.
func (m *Master) SetAddress(addr string) {
	if addr == "" {
		return
	}
	old := m.addr.Swap(&addr)
	if *old == addr {
		return
	}
	// A node that is its own central manager reports to itself.
	m.cm.CompareAndSwap(*old, addr)
	m.log.Info("the node's address changed", "address", addr, "was", *old)
	if s := m.Startd(); s != nil {
		s.SetAddress(addr)
	}
}

// NodeLost tells the node's daemons that the sea declared the node name
// failed or gone: the collector drops its ads, and the schedd starts
// requeueing the jobs it ran there (schedd.Schedd.NodeLost).
func (m *Master) NodeLost(ctx context.Context, name string) {
	if c := m.Collector(); c != nil {
		if n := c.NodeLost(name); n > 0 {
			m.log.Info("dropped the ads of a lost node", "node", name, "sources", n)
		}
	}
	if s := m.Schedd(); s != nil {
		s.NodeLost(ctx, name)
	}
}

// Reconfig applies a new configuration: a changed CONDOR_HOST (or
// COLLECTOR_HOST) moves the startd and schedd to the new central manager
// (withdrawing their ads from the old one), DAEMON_LIST starts and stops
// daemons, the negotiator and collector re-read their knobs, the schedd
// its limits, and the startd its STARTD_ATTRS. Other
// knobs take effect when a daemon is restarted.
func (m *Master) Reconfig(cfg *config.Config) error {
	return m.reconfig(cfg, "node agent")
}

// reconfig is Reconfig asked for by who (recorded in the history).
func (m *Master) reconfig(cfg *config.Config, who string) error {
	if cfg == nil {
		return errors.New("daemon: Reconfig of a nil configuration")
	}
	m.warnPoolPassword(cfg)
	m.recordConfig(m.cfg.Swap(cfg), cfg, who)
	old := m.CollectorAddress()
	want := map[string]bool{}
	for _, d := range daemonList(cfg) {
		want[d] = true
	}
	m.mu.Lock()
	var stop []*supervised
	for n, s := range m.daemons {
		if !want[n] {
			stop = append(stop, s)
			delete(m.daemons, n)
		}
	}
	var start []string
	for _, d := range daemonList(cfg) {
		if m.daemons[d] == nil {
			start = append(start, d)
		}
	}
	m.mu.Unlock()
	for _, s := range stop {
		s.cancel()
		<-s.done
	}
	// The daemons that stop (a negotiator handing a pool back, say) never
	// see the new central manager: none of them advertises there or
	// negotiates with its collector on its way out.
	m.cm.Store(m.collectorAddr(cfg))
	select {
	case m.reconfigured <- struct{}{}:
	default:
	}
	var errs []error
	for _, d := range start {
		errs = append(errs, m.startDaemon(m.ctx, d))
	}
	// The startd and schedd withdraw their ads from the old collector in
	// the background: one that is gone or cut off (a central manager that
	// failed) must not hold up the move for the five seconds a withdrawal
	// may take. Reconfig waits a second at most, so that a collector that
	// answers has lost the ads when it returns.
	ctx, cancel := context.WithTimeout(m.ctx, 5*time.Second)
	var moves sync.WaitGroup
	for _, d := range m.Daemons() {
		switch r := m.running(d).(type) {
		case *startd.Startd:
			errs = append(errs, r.Reconfig(cfg))
			moves.Go(func() { r.SetCollector(ctx, old) })
		case *schedd.Schedd:
			errs = append(errs, r.Reconfig(cfg))
			moves.Go(func() { r.SetCollector(ctx, old) })
		case *negotiator.Negotiator:
			errs = append(errs, r.Reconfig(cfg))
		case *collector.Collector:
			if life, err := cfg.Duration("CLASSAD_LIFETIME", 900*time.Second); err == nil {
				r.SetLifetime(life)
			}
		}
	}
	moved := make(chan struct{})
	go func() {
		moves.Wait()
		cancel()
		close(moved)
	}()
	select {
	case <-moved:
	case <-time.After(time.Second):
	}
	return errors.Join(errs...)
}

// Config returns the configuration in effect.
func (m *Master) Config() *config.Config { return m.cfg.Load() }

// Stop stops every daemon (withdrawing their ads, killing running jobs)
// and waits for them, or for ctx.
func (m *Master) Stop(ctx context.Context) error {
	m.cancel()
	done := make(chan struct{})
	go func() {
		m.wg.Wait()
		m.closeHistory()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("daemon: stopping: %w", ctx.Err())
	}
}

// warnPoolPassword warns that a pool password in the configuration is no
// longer used: the daemons authenticate each other and their clients with
// tokens.
func (m *Master) warnPoolPassword(cfg *config.Config) {
	for _, knob := range []string{"POOL_PASSWORD", "SEC_POOL_PASSWORD_FILE"} {
		if v, ok := cfg.Get(knob); ok && v != "" {
			m.log.Warn(knob + " is set but no longer used: the daemons authenticate with tokens (see docs/security.md); remove it")
		}
	}
}

// Route is one endpoint of the daemons' wire and the scopes a caller's
// token needs for it.
type Route struct {
	// Path is the endpoint's path under wire.PathPrefix ("schedd/submit").
	Path string
	// Scopes are those of which the token must grant one. A handler may
	// ask for more once it has read the request: the collector's update
	// asks for the ADVERTISE_* scope of the ad type, the schedd lets a
	// WRITE caller act on its own jobs only, and the collector shows
	// private attributes to NEGOTIATOR alone.
	Scopes []auth.Scope
}

// Routes lists every endpoint Handler serves with the scopes it needs, the
// levels HTCondor's daemons ask for the same commands: READ to query,
// WRITE to submit and manage one's jobs, ADMINISTRATOR to reconfigure,
// NEGOTIATOR for what the negotiator asks of schedds, DAEMON for claims and
// the reports between daemons, ADVERTISE_* to update the collector.
// ADMINISTRATOR records a pondctl apply in the central manager's history:
// the operator's token grants it, a node's (DAEMON) does not, so no node
// can write who changed the pool.
func Routes() []Route {
	one := func(p string, s auth.Scope) Route { return Route{Path: p, Scopes: []auth.Scope{s}} }
	advertise := []auth.Scope{auth.AdvertiseStartd, auth.AdvertiseSchedd, auth.AdvertiseMaster, auth.Daemon}
	return []Route{
		{Path: "collector/update", Scopes: advertise},
		{Path: "collector/invalidate", Scopes: advertise},
		one("collector/query", auth.Read),
		one("collector/history", auth.Read),
		one("collector/apply", auth.Administrator),
		one("negotiator/reschedule", auth.Write),
		one("schedd/newcluster", auth.Write),
		one("schedd/submit", auth.Write),
		one("schedd/submitfactory", auth.Write),
		one("schedd/newclusters", auth.Write),
		one("schedd/submitbatch", auth.Write),
		one("schedd/submitdigest", auth.Write),
		one("schedd/act", auth.Write),
		one("schedd/query", auth.Read),
		one("schedd/querystream", auth.Read),
		one("schedd/summary", auth.Read),
		one("schedd/history", auth.Read),
		one("schedd/idle", auth.Negotiator),
		one("schedd/matches", auth.Negotiator),
		one("schedd/jobreport", auth.Daemon),
		one("schedd/claiminfo", auth.Daemon),
		one("schedd/transfer", auth.Daemon),
		one("schedd/streamoutput", auth.Daemon),
		one("schedd/tail", auth.Write),
		one("startd/claim", auth.Daemon),
		one("startd/activate", auth.Daemon),
		one("startd/release", auth.Daemon),
		one("startd/vacate", auth.Daemon),
		one("startd/claiminfo", auth.Daemon),
		one("startd/transfer", auth.Daemon),
		one("startd/joboutput", auth.Daemon),
		one("startd/quarantine", auth.Administrator),
		one("startd/drain", auth.Administrator),
		one("master/info", auth.Read),
		one("master/reconfig", auth.Administrator),
	}
}

// Handler serves the daemons' endpoints; mount it at wire.PathPrefix on the
// node's API server. With a Verifier, every request needs a token that
// grants its route's scope (Routes): one without a valid token gets 401,
// one without the scope 403, and neither reaches a daemon. A path that is
// no route gets 404.
func (m *Master) Handler() http.Handler {
	mux := http.NewServeMux()
	for _, d := range []string{Collector, Negotiator, Schedd, Startd} {
		prefix := wire.PathPrefix + strings.ToLower(d)
		mux.Handle(prefix+"/", http.StripPrefix(prefix, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			m.mu.Lock()
			s := m.daemons[d]
			m.mu.Unlock()
			if s == nil {
				wire.WriteError(w, http.StatusServiceUnavailable, fmt.Errorf("%s does not run on %s", strings.ToLower(d), m.opts.Name))
				return
			}
			s.handler.Load().(http.Handler).ServeHTTP(w, r)
		})))
	}
	mux.Handle(wire.PathPrefix+"master/info", wire.Handle(func(ctx context.Context, _ *struct{}) (*wire.MasterInfo, error) {
		return &wire.MasterInfo{Name: m.opts.Name, Address: m.Address(), CondorHost: m.CollectorAddress(), Daemons: m.Daemons(), StartTime: m.start.Unix()}, nil
	}))
	mux.Handle(wire.PathPrefix+"master/reconfig", wire.Handle(func(ctx context.Context, _ *struct{}) (*wire.MasterInfo, error) {
		cfg := m.Config()
		if m.opts.Reload != nil {
			c, err := m.opts.Reload()
			if err != nil {
				return nil, fmt.Errorf("%w: reloading configuration: %w", wire.ErrBadRequest, err)
			}
			cfg = c
		}
		who := "condor_reconfig"
		if cl, ok := auth.FromContext(ctx); ok && cl != nil {
			who = cl.Subject
		}
		if err := m.reconfig(cfg, who); err != nil {
			return nil, err
		}
		return &wire.MasterInfo{Name: m.opts.Name, Address: m.Address(), CondorHost: m.CollectorAddress(), Daemons: m.Daemons(), StartTime: m.start.Unix()}, nil
	}))
	if m.opts.Verifier == nil {
		return mux
	}
	guarded := http.NewServeMux()
	for _, rt := range Routes() {
		guarded.Handle(wire.PathPrefix+rt.Path, auth.RequireAny(m.opts.Verifier, rt.Scopes, mux))
	}
	return guarded
}
