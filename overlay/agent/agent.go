// Package agent is the pond node agent that "pondctl agent" runs. It only
// wires, in this one place, what a node runs: it holds the agent's Config
// (flags and knobs) and its validation, builds each engine with what it
// needs, registers the HTTP API's routes (overlay/api) with handlers that
// live in the engines, and starts and stops the engines in order. The
// engines are serf membership in the sea (overlay/gossip), how the node is
// reached (overlay/reach), PonD tree queries over TCP matched against the
// node's live machine ad (overlay/tree, overlay/query, overlay/machinead),
// pond-match queries (overlay/match), following the sea (overlay/seawatch),
// the HTCondor-compatible daemons following the node's CONDOR_HOST
// (overlay/nodedaemons, condor/daemon) and CEDAR on the API's port
// (overlay/cedarport), the node's pond membership (overlay/member), the
// pond policy (overlay/autoscale), the central-manager fail-over
// (overlay/failover), flocking (overlay/flock), the pilot factory
// (overlay/factory), a glidein's runtime (overlay/glidein), the node's
// health (overlay/health) and the watch on its token (overlay/tokenwatch).
//
// The agent implements the small interfaces the engines drive it through
// (member.Node, autoscale.Node, failover.Node, flock.Node, glidein.Node,
// reach.Node, machinead.Source): the engines call its methods
// (SetMembership, Drain, Query, ...) rather than callbacks, so a reader
// finds who reacts to a new CONDOR_HOST by following calls.
package agent

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/metrics"
	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/autoscale"
	"github.com/pond-htc/pond/overlay/factory"
	"github.com/pond-htc/pond/overlay/failover"
	"github.com/pond-htc/pond/overlay/flock"
	"github.com/pond-htc/pond/overlay/glidein"
	"github.com/pond-htc/pond/overlay/gossip"
	"github.com/pond-htc/pond/overlay/health"
	"github.com/pond-htc/pond/overlay/internal/jsonfile"
	"github.com/pond-htc/pond/overlay/knobs"
	"github.com/pond-htc/pond/overlay/machinead"
	"github.com/pond-htc/pond/overlay/match"
	"github.com/pond-htc/pond/overlay/member"
	"github.com/pond-htc/pond/overlay/nodedaemons"
	"github.com/pond-htc/pond/overlay/query"
	"github.com/pond-htc/pond/overlay/reach"
	"github.com/pond-htc/pond/overlay/relay"
	"github.com/pond-htc/pond/overlay/seawatch"
	"github.com/pond-htc/pond/overlay/tokenwatch"
	"github.com/pond-htc/pond/overlay/tree"
)

// Agent is a running node agent.
type Agent struct {
	cfg *Config
	// end is the node's end set at run time (SetEndTime), when endSet;
	// see nodeEnd.
	endMu  sync.Mutex
	end    time.Time
	endSet bool
	logger *slog.Logger
	apiLn  net.Listener
	// apiAddr is the address the API is advertised on: it changes when
	// a relay gives the agent other addresses (reach.Follower).
	apiAddr atomic.Pointer[string]
	mux     *http.ServeMux
	started time.Time
	// verifier checks the tokens of API requests; nil leaves the API open.
	verifier *auth.Verifier
	// token gives what the agent presents when it calls other agents and
	// its daemons call other daemons: the token file's content, read again
	// when the file changes ("" without a token file).
	token func() string
	// served lists the API routes the agent serves.
	served []api.Route
	// serverTLS and clientTLS are the sea's TLS (the node's certificate
	// and the sea's CA): the API and tree queries are served with the
	// first, other agents called with the second. Both nil for plain
	// HTTP and TCP.
	serverTLS, clientTLS *tls.Config

	sea     *gossip.Sea
	tree    *tree.Server
	eval    *query.Evaluator
	daemons *nodedaemons.Daemons
	members *member.Manager
	policy  *autoscale.Policy // nil when the pond policy is off
	// factory is the pilot factory, on an agent that runs its pool's
	// collector; metrics is the registry /metrics serves.
	factory *factory.Host
	metrics *prometheus.Registry
	// flock is the pool's flocking: its flock manager while the agent acts
	// as its pool's central manager, and the following of the acting
	// manager's flocks.
	flock *flock.Keeper
	// fastInterval is the policy's NEGOTIATOR_MIN_INTERVAL while it has
	// ponds.
	fastInterval string

	// ctx is the services' context, cancelled by stopServices, which then
	// waits for the goroutines in bg.
	ctx    context.Context
	cancel context.CancelFunc
	bg     sync.WaitGroup

	// hostMu guards cfg.CondorHost.
	hostMu sync.Mutex
	leave  chan struct{}
	once   sync.Once

	// ad is the node's live machine ad.
	ad *machinead.Ad
	// alarms raise the alarms before the node's credentials expire.
	alarms *tokenwatch.Alarms

	// glidein is the glidein's runtime, nil for an agent that is no
	// glidein; cmProbe calls its central manager.
	glidein *glidein.Runtime
	cmProbe func(context.Context) error
	// tunnel is a relayed agent's tunnel to its relay (nil for an agent
	// reached directly): it gives the agent's listeners and carries its
	// gossip. An agent reached directly relays for others (relay).
	tunnel *relay.Client
	relay  *relay.Relay
	// treeLn is the tree listener the connect-back check bound, for
	// startTree; gossipBind the gossip address it chose when -bind asks
	// for any port ("" otherwise).
	treeLn     net.Listener
	gossipBind string
	// fo is the node's part in its pool's central-manager fail-over, nil
	// when the pool keeps no replicas (POND_CM_REPLICAS); joined is closed
	// once Run has joined the sea (or found no one to join).
	fo         *failover.Keeper
	joined     chan struct{}
	joinedOnce sync.Once
	// claims proves the other members' claims to act as their pool's
	// central manager or to announce it (overlay/failover's Claims).
	claims *failover.Claims
}

// New binds the agent's sockets and starts its services: gossip, tree
// queries, the daemons, pond membership and the pond policy. It does not
// join anyone or serve the API yet; Run does.
func New(ctx context.Context, cfg *Config, logger *slog.Logger) (*Agent, error) {
	if cfg.TrustedKeys == "" && !cfg.InsecureAPI {
		return nil, errors.New("the agent's API would be open to anyone who reaches " + cfg.API + ": give it -trusted-keys FILE and -token-issuer ISS " +
			"(a working directory's .pond/auth/trusted.pem and the issuer `pondctl token list -json` names), or -insecure-api to serve it unauthenticated")
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	// The pond membership's knobs, read before anything starts.
	orphan, err := knobs.Reader(cfg.Knob).Duration(knobs.OrphanTimeout)
	if err != nil {
		return nil, err
	}
	policy, err := knobs.Reader(cfg.Knob).Expr(knobs.JoinPolicy)
	if err != nil {
		return nil, err
	}
	if err := health.CheckKnobs(knobs.Reader(cfg.Knob)); err != nil {
		return nil, err
	}
	if _, ok := cfg.Knob(health.FormerBlackholeRuntime); ok {
		logger.Warn(health.FormerBlackholeRuntime + " has no effect: a node is quarantined only for jobs it could not start through its own fault, however soon other jobs fail")
	}
	verifier, token, err := credentials(cfg)
	if err != nil {
		return nil, err
	}
	serverTLS, clientTLS, err := seaTLS(cfg)
	if err != nil {
		return nil, err
	}
	if cfg.DataDir != "" {
		if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
			return nil, fmt.Errorf("data dir: %w", err)
		}
	}
	// A glidein validates before it binds anything or starts its daemons.
	var rt *glidein.Runtime
	probe := glidein.CentralManagerProbe(cfg.CondorHost, cfg.Pool, clientTLS, token)
	if cfg.Glidein != "" {
		if rt, err = glidein.Start(ctx, cfg.glideinSettings(), logger, probe); err != nil {
			return nil, err
		}
	}
	failed := func(err error) error {
		if rt != nil {
			rt.Fail(glidein.ReasonError, err, 1)
		}
		return err
	}
	a := &Agent{
		cfg:     cfg,
		logger:  logger,
		mux:     http.NewServeMux(),
		started: time.Now().UTC(),
		leave:   make(chan struct{}),
		joined:  make(chan struct{}),

		verifier:  verifier,
		token:     token,
		serverTLS: serverTLS,
		clientTLS: clientTLS,

		glidein: rt,
		cmProbe: probe,
	}
	a.claims = &failover.Claims{TLS: clientTLS, Self: cfg.Name, Token: token, Go: a.bg.Go, Logger: logger}
	if err := a.listen(ctx); err != nil {
		return nil, failed(err)
	}
	a.ctx, a.cancel = context.WithCancel(context.WithoutCancel(ctx))
	a.flock = a.newFlock()
	if a.fo, err = a.newFailover(); err != nil {
		a.apiLn.Close()
		if a.tunnel != nil {
			a.tunnel.Close()
		}
		return nil, failed(err)
	}
	a.ad = machinead.New(cfg.Name, cfg.Condor, cfg.Attrs, cfg.ConfigFile, cfg.DataDir, logger)
	a.glideinAttrs()
	a.eval = query.NewEvaluator(a.MachineAd)
	if err := a.start(orphan, policy); err != nil {
		a.stopServices()
		if a.sea != nil {
			a.sea.Shutdown()
		}
		a.apiLn.Close()
		if a.tunnel != nil {
			a.tunnel.Close()
		}
		return nil, failed(err)
	}
	a.routes()
	return a, nil
}

// tokenLeeway is the clock skew tolerated on a token's times.
const tokenLeeway = 30 * time.Second

// credentials reads what the agent authenticates with: the verifier of the
// API's tokens, from the trusted keys (nil without them) and the list of
// revoked tokens beside them (auth.RevokedFile), and the token
// the agent presents to other agents and its daemons to other daemons,
// read again whenever the token file changes ("" without a token file).
func credentials(cfg *Config) (*auth.Verifier, func() string, error) {
	var v *auth.Verifier
	if cfg.TrustedKeys != "" {
		keys, delegated, err := auth.ReadTrustedKeys(cfg.TrustedKeys)
		if err != nil {
			return nil, nil, fmt.Errorf("trusted keys: %w", err)
		}
		// The revoked file of the authority that made the keys file, when
		// the agent shares its machine with that authority.
		revoked := auth.Revocations(filepath.Join(filepath.Dir(cfg.TrustedKeys), auth.RevokedFile))
		// Keys delegated later (a pool's factory given its key while
		// the agent runs) are trusted as the file gains them.
		v = &auth.Verifier{Issuer: cfg.TokenIssuer, Keys: keys, Delegated: delegated, Leeway: tokenLeeway, Revoked: revoked,
			MoreDelegated: auth.WatchDelegated(cfg.TrustedKeys)}
	}
	token := func() string { return "" }
	if cfg.TokenFile != "" {
		var err error
		if token, err = auth.TokenFile(cfg.TokenFile); err != nil {
			return nil, nil, err
		}
	}
	return v, token, nil
}

// seaTLS makes the agent's TLS configurations from its certificate, key
// and the sea's CA: nil, nil without them.
func seaTLS(cfg *Config) (server, client *tls.Config, err error) {
	if cfg.TLSCert == "" {
		return nil, nil, nil
	}
	if server, err = auth.ServerTLS(cfg.TLSCert, cfg.TLSKey, cfg.TLSCA); err != nil {
		return nil, nil, fmt.Errorf("-tls-cert: %w", err)
	}
	if client, err = auth.ClientTLS(cfg.TLSCA, cfg.TLSCert, cfg.TLSKey); err != nil {
		return nil, nil, fmt.Errorf("-tls-cert: %w", err)
	}
	return server, client, nil
}

// start starts the services in order; each may use those before it.
// orphan and policy configure the pond membership.
func (a *Agent) start(orphan time.Duration, policy string) error {
	a.metrics = metrics.NewRegistry()
	gc := gossip.Config{
		NodeName:      a.cfg.Name,
		BindAddr:      cmp.Or(a.gossipBind, a.cfg.Bind),
		AdvertiseAddr: a.addrs().Gossip(a.ctx, a.gossipBind),
		Tags:          a.baseTags(),
		DataDir:       a.cfg.DataDir,
		EncryptKey:    a.cfg.Encrypt,
		Profile:       a.cfg.GossipProfile,
		NoCompression: a.cfg.NoGossipCompression,
		Logger:        a.logger,
		Insecure:      a.cfg.InsecureGossip,
	}
	if a.tunnel != nil {
		// Gossip leaves and arrives through the tunnel, at the worker's
		// gossip address on the relay.
		gc.Transport, gc.AdvertiseAddr = a.tunnel.Gossip(), a.tunnel.Addrs().Gossip
	}
	s, err := gossip.Start(a.ctx, gc)
	if err != nil {
		return err
	}
	a.sea = s
	if err := a.startRelay(); err != nil {
		return err
	}
	if err := a.startTree(); err != nil {
		return fmt.Errorf("tree queries: %w", err)
	}
	if err := a.startDaemons(); err != nil {
		return err
	}
	if a.tunnel != nil {
		a.followRelay()
	}
	if err := a.startMembership(orphan, policy); err != nil {
		return err
	}
	if err := a.startAutoscale(); err != nil {
		return fmt.Errorf("pond policy: %w", err)
	}
	if err := a.startFactory(); err != nil {
		return fmt.Errorf("pilot factory: %w", err)
	}
	if err := a.startFlock(); err != nil {
		return fmt.Errorf("flocking: %w", err)
	}
	if err := a.registerMetrics(); err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	a.bg.Go(func() { match.Serve(a.ctx, a.sea, a.cfg.Name, a.eval, a.logger) })
	a.bg.Go(func() { a.tree.KeepConnected(a.ctx, seawatch.ConnectInterval) })
	w := &seawatch.Watcher{Sea: a.sea, Tree: a.tree, Lost: func(ctx context.Context, name string) { a.daemons.NodeLost(ctx, name) },
		Check: a.members.Check, Logger: a.logger}
	a.bg.Go(func() { w.Run(a.ctx) })
	al, err := a.credentialAlarms()
	if err != nil {
		return fmt.Errorf("credential alarms: %w", err)
	}
	a.alarms = al
	a.bg.Go(func() { al.Run(a.ctx) })
	if a.cfg.TokenFile != "" {
		w := &tokenwatch.Watch{Path: a.cfg.TokenFile, Token: a.token, Now: time.Now, Log: a.logger, Alarmed: len(al.Thresholds) > 0}
		if a.glidein != nil {
			w.End = a.glidein.Status().EndTime
		}
		a.bg.Go(func() { w.Run(a.ctx, tokenwatch.CheckInterval) })
	}
	if a.fo != nil {
		a.bg.Go(a.runFailover)
	}
	return nil
}

// stopServices stops what start started, last first.
func (a *Agent) stopServices() {
	a.cancel()
	a.bg.Wait()
	if a.daemons != nil {
		a.daemons.Stop()
	}
	if a.tree != nil {
		a.tree.Close()
	}
}

// Run joins the sea, serves the API and records agent.json, until ctx is
// done or Leave is called, or, for a glidein, until it runs itself down;
// then it leaves the sea gracefully, stops the services and shuts down. A
// glidein drains before it leaves, and records its end in its status file
// once it has left.
func (a *Agent) Run(ctx context.Context) (err error) {
	if a.glidein != nil {
		defer func() { a.glidein.Finish(err) }()
	}
	srv := &http.Server{Handler: a.mux, ReadHeaderTimeout: 10 * time.Second, TLSConfig: a.serverTLS,
		// Refused TLS handshakes, among others, go to the agent's log.
		ErrorLog: slog.NewLogLogger(a.logger.Handler(), slog.LevelWarn)}
	srvErr := make(chan error, 1)
	apiLn := a.cedarListener(ctx, a.apiLn)
	if a.serverTLS != nil {
		// The certificate comes from TLSConfig.GetCertificate.
		go func() { srvErr <- srv.ServeTLS(apiLn, "", "") }()
	} else {
		go func() { srvErr <- srv.Serve(apiLn) }()
	}
	defer a.shutdown(srv)

	if a.cfg.DataDir != "" {
		if err := a.writeInfo(); err != nil {
			return err
		}
	}
	a.logger.Info("agent started", "name", a.cfg.Name, "api", a.APIAddr(), "gossip", a.sea.GossipAddr(),
		"pool", a.cfg.Pool, "role", a.cfg.Role, "encrypted", a.sea.Encrypted(), "authenticated", a.verifier != nil, "tls", a.serverTLS != nil)
	listens := a.APIAddr()
	if a.apiLn != nil && a.tunnel == nil {
		listens = a.apiLn.Addr().String() // 0.0.0.0 where a.APIAddr() is one of its addresses
	}
	if ip := net.ParseIP(reach.Host(listens)); ip == nil || !ip.IsLoopback() {
		if a.verifier == nil {
			a.logger.Warn("the agent's API is open to anyone who reaches "+a.APIAddr()+": give it -trusted-keys and -token-issuer", "api", a.APIAddr())
		}
		if a.serverTLS == nil {
			a.logger.Warn("INSECURE: the agent serves its API and tree queries in plain text on "+a.APIAddr()+
				", which other hosts can reach: tokens and pool credentials cross the network in clear and anyone may answer tree queries;"+
				" give it -tls-cert, -tls-key and -tls-ca (pondctl cert create issues them), or an -api address on loopback", "api", a.APIAddr())
		}
	}
	if a.verifier != nil && a.cfg.TokenFile == "" {
		a.logger.Warn("the agent checks tokens but has none to present: its daemons cannot report to a collector or claim a slot; give it -token-file with a node token (condor:/DAEMON)")
	}

	joinCtx, cancelJoin := context.WithCancel(ctx)
	defer cancelJoin()
	var wg sync.WaitGroup
	if len(a.cfg.Join) > 0 {
		wg.Go(func() {
			defer a.markJoined()
			if _, err := a.sea.Join(joinCtx, a.cfg.Join, gossip.JoinRetry(a.cfg.GossipProfile)); err != nil && joinCtx.Err() == nil {
				a.logger.Error("join failed", "err", err)
			}
		})
	} else {
		a.markJoined()
	}
	defer wg.Wait()
	defer cancelJoin()

	ended, stopGlidein := a.runGlidein(ctx)
	select {
	case <-ctx.Done():
		a.logger.Info("signalled; leaving the sea")
		stopGlidein(context.Cause(ctx))
	case <-a.leave:
		a.logger.Info("asked to leave the sea")
		stopGlidein(glidein.ErrAskedToLeave)
	case e := <-ended:
		a.logger.Info("the glidein runs itself down; leaving the sea", "reason", e.Reason)
		stopGlidein(nil)
	case err := <-srvErr:
		stopGlidein(err)
		return fmt.Errorf("API server: %w", err)
	case <-a.sea.ShutdownCh():
		stopGlidein(errors.New("serf shut down"))
		return errors.New("serf shut down")
	}
	return nil
}

// markJoined says that Run has joined the sea, or tried to.
func (a *Agent) markJoined() { a.joinedOnce.Do(func() { close(a.joined) }) }

// shutdown leaves the sea, stops the services and the API server, and
// removes agent.json.
func (a *Agent) shutdown(srv *http.Server) {
	if err := a.sea.Leave(); err != nil {
		a.logger.Warn("leave failed", "err", err)
	}
	a.stopServices()
	if err := a.sea.Shutdown(); err != nil {
		a.logger.Warn("serf shutdown failed", "err", err)
	}
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
	}
	if a.relay != nil {
		a.relay.Close()
	}
	if a.tunnel != nil {
		a.tunnel.Close()
	}
	if a.cfg.DataDir != "" {
		os.Remove(filepath.Join(a.cfg.DataDir, api.InfoFile))
	}
	a.logger.Info("agent stopped")
}

// Leave asks a running agent to leave the sea and exit.
func (a *Agent) Leave() { a.once.Do(func() { close(a.leave) }) }

func (a *Agent) writeInfo() error {
	info := api.Info{Name: a.cfg.Name, PID: os.Getpid(), API: a.APIAddr(), Gossip: a.sea.GossipAddr(), Started: a.started}
	path := filepath.Join(a.cfg.DataDir, api.InfoFile)
	if err := jsonfile.Write(path, info); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// Name is the node's name in the sea.
func (a *Agent) Name() string { return a.cfg.Name }

// APIAddr is the address the HTTP API is reached on.
func (a *Agent) APIAddr() string {
	if p := a.apiAddr.Load(); p != nil {
		return *p
	}
	return ""
}

// setAPIAddr makes addr the address the agent advertises for its API.
func (a *Agent) setAPIAddr(addr string) { a.apiAddr.Store(&addr) }

// Sea is the agent's serf membership.
func (a *Agent) Sea() *gossip.Sea { return a.sea }

func (a *Agent) baseTags() map[string]string {
	tags := map[string]string{
		api.TagRole:    a.cfg.Role,
		api.TagPool:    a.cfg.Pool,
		api.TagPond:    a.cfg.Pond,
		api.TagCM:      a.CondorHost(),
		api.TagAPI:     a.APIAddr(),
		api.TagVersion: gossip.ProtocolVersion,
	}
	if a.cfg.Glidein != "" {
		tags[api.TagGlidein] = a.cfg.Glidein
	}
	if a.tunnel != nil {
		tags[api.TagRelay] = a.tunnel.Addrs().Relay
	}
	return tags
}

// SetTags sets several serf tags in one update (gossip.Sea.UpdateTags);
// an empty value removes a tag (pool and pond are kept, empty).
func (a *Agent) SetTags(update map[string]string) error { return a.sea.UpdateTags(update) }

// Self describes the agent.
func (a *Agent) Self() api.Self {
	lm := a.sea.LocalMember()
	return api.Self{
		Name:       a.cfg.Name,
		API:        a.APIAddr(),
		Gossip:     a.sea.GossipAddr(),
		Pool:       lm.Tags[api.TagPool],
		Pond:       lm.Tags[api.TagPond],
		Role:       lm.Tags[api.TagRole],
		CondorHost: lm.Tags[api.TagCM],
		PID:        os.Getpid(),
		Started:    a.started,
		Encrypted:  a.sea.Encrypted(),
		Reach:      a.Reach(),
		Relay:      a.RelayName(),
		Tags:       lm.Tags,
		Attributes: a.ad.Static,
		Config:     knobs.Shown(a.cfg.Knobs),
		Token:      tokenwatch.Info(a.cfg.TokenFile, a.token),
		Glidein:    a.glideinStatus(),
		Quarantine: a.quarantine(),
		EndTime:    a.endTime(),
	}
}

// MachineAd returns the node's live machine ad (machinead.Ad).
func (a *Agent) MachineAd() *classad.Ad { return a.ad.Get(adSource{a}) }

// adSource is the agent as its machine ad reads it (machinead.Source).
type adSource struct{ *Agent }

func (s adSource) CpusInUse() (int64, bool) { return s.daemons.CpusInUse() }

// Logging says where an agent's logs go: to Output (stderr when nil), at
// Level and above. The -log-level flag overrides Level.
type Logging struct {
	Output io.Writer
	Level  slog.Level
}

// Main runs the agent with command-line arguments args (without the
// "agent" word) until ctx is done or the agent is told to leave, and returns
// the process exit code. It is the process's entry point: it sets the
// process's umask to 077, so that everything the agent and the daemons it
// hosts write (data directory, snapshot, spool, logs) is private to the
// user that runs it.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer, logs Logging) int {
	cfg, err := ParseArgs(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "pondctl agent: %v\n", err)
		return 1
	}
	level := logs.Level
	if cfg.LogLevel != "" {
		if err := level.UnmarshalText([]byte(cfg.LogLevel)); err != nil {
			fmt.Fprintf(stderr, "pondctl agent: -log-level %q: %v\n", cfg.LogLevel, err)
			return 1
		}
	}
	out := logs.Output
	if out == nil {
		out = stderr
	}
	logger := slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: level})).With("agent", cfg.Name)
	syscall.Umask(0o077)
	a, err := New(ctx, cfg, logger)
	if err != nil {
		fmt.Fprintf(stderr, "pondctl agent: %v\n", err)
		if _, ok := errors.AsType[*glidein.ValidationError](err); ok {
			return glidein.ExitValidation
		}
		return 1
	}
	if err := a.Run(ctx); err != nil {
		fmt.Fprintf(stderr, "pondctl agent: %v\n", err)
		return 1
	}
	return 0
}
