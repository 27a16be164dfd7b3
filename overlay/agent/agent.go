// Package agent is the pond node agent run by "pondctl agent": serf
// membership in the sea, the node's HTTP API, and the daemons it hosts.
package agent

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/pond-htc/pond/overlay/gossip"
)

// InfoFile is the name, inside the data directory, of the file where a
// running agent records its real addresses.
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
	data, err := os.ReadFile(filepath.Join(dataDir, InfoFile))
	if err != nil {
		return nil, err
	}
	var info Info
	if err := json.Unmarshal(data, &info); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dataDir, InfoFile), err)
	}
	return &info, nil
}

// Self describes an agent, as GET /v1/self returns it.
type Self struct {
	Name       string            `json:"name"`
	API        string            `json:"api"`
	Gossip     string            `json:"gossip"`
	Pool       string            `json:"pool"`
	Pond       string            `json:"pond"`
	Role       string            `json:"role"`
	CondorHost string            `json:"condor_host"`
	PID        int               `json:"pid"`
	Started    time.Time         `json:"started"`
	Encrypted  bool              `json:"encrypted"`
	Tags       map[string]string `json:"tags"`
	Attributes map[string]any    `json:"attributes"`
	Config     map[string]string `json:"config,omitempty"`
}

// Health is what GET /v1/health returns.
type Health struct {
	Status  string `json:"status"`
	Name    string `json:"name"`
	Members int    `json:"members"`
}

// Agent is a running node agent.
type Agent struct {
	cfg     *Config
	logger  *slog.Logger
	sea     *gossip.Sea
	apiLn   net.Listener
	apiAddr string
	mux     *http.ServeMux
	started time.Time
	attrs   map[string]any

	tagMu sync.Mutex
	leave chan struct{}
	once  sync.Once

	hostMu sync.Mutex
	onHost []func(addr string)
}

// New binds the agent's gossip and API sockets and starts serf. It does not
// join anyone or serve the API yet; Run does.
func New(ctx context.Context, cfg *Config, logger *slog.Logger) (*Agent, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	ln, err := net.Listen("tcp", cfg.API)
	if err != nil {
		return nil, fmt.Errorf("API listener on %s: %w", cfg.API, err)
	}
	a := &Agent{
		cfg:     cfg,
		logger:  logger,
		apiLn:   ln,
		apiAddr: ln.Addr().String(),
		mux:     http.NewServeMux(),
		started: time.Now().UTC(),
		leave:   make(chan struct{}),
	}
	if cfg.EnableDebug {
		a.mux.HandleFunc("/debug/pprof/", pprof.Index)
		a.mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		a.mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		a.mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		a.mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	a.attrs = defaultAttrs(cfg.Name, cfg.Condor)
	for k, v := range cfg.Attrs {
		a.attrs[k] = v
	}
	if cfg.DataDir != "" {
		if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
			ln.Close()
			return nil, fmt.Errorf("data dir: %w", err)
		}
	}
	s, err := gossip.Start(ctx, gossip.Config{
		NodeName:      cfg.Name,
		BindAddr:      cfg.Bind,
		AdvertiseAddr: cfg.Advertise,
		Tags:          a.baseTags(),
		DataDir:       cfg.DataDir,
		EncryptKey:    cfg.Encrypt,
		Profile:       cfg.GossipProfile,
		NoCompression: cfg.NoGossipCompression,
		Logger:        logger,
	})
	if err != nil {
		ln.Close()
		return nil, err
	}
	a.sea = s
	a.routes()
	return a, nil
}

func (a *Agent) condorHost() string {
	a.hostMu.Lock()
	defer a.hostMu.Unlock()
	if a.cfg.CondorHost == "" {
		return a.apiAddr
	}
	return a.cfg.CondorHost
}

// Logger is the agent's logger.
func (a *Agent) Logger() *slog.Logger { return a.logger }

// DataDir is the agent's data directory ("" when it has none).
func (a *Agent) DataDir() string { return a.cfg.DataDir }

// ConfigFile is the path of the agent's -config file ("" when none).
func (a *Agent) ConfigFile() string { return a.cfg.ConfigFile }

// Knob returns a setting of the agent's configuration file, with macros
// expanded.
func (a *Agent) Knob(name string) (string, bool) {
	if a.cfg.Condor != nil {
		return a.cfg.Condor.Get(name)
	}
	v, ok := a.cfg.Knobs[name]
	return v, ok
}

// CondorHost is the API address of the node's central manager: its own
// when it belongs to no pool or pond.
func (a *Agent) CondorHost() string { return a.condorHost() }

// SetCondorHost points the node at the central manager at addr ("" or its
// own address: itself), at run time: the cm tag changes and every function
// registered with OnCondorHost is told.
//
// tags, when not nil, are set in the same serf update (one broadcast rather
// than several).
func (a *Agent) SetCondorHost(addr string, tags map[string]string) error {
	if addr == a.apiAddr {
		addr = ""
	}
	a.hostMu.Lock()
	a.cfg.CondorHost = addr
	fns := append([]func(string){}, a.onHost...)
	a.hostMu.Unlock()
	host := a.condorHost()
	update := map[string]string{gossip.TagCM: host}
	for k, v := range tags {
		update[k] = v
	}
	if err := a.SetTags(update); err != nil {
		return err
	}
	for _, f := range fns {
		f(host)
	}
	return nil
}

// OnCondorHost registers f to be called with the new central manager
// address whenever SetCondorHost changes it.
func (a *Agent) OnCondorHost(f func(addr string)) {
	a.hostMu.Lock()
	a.onHost = append(a.onHost, f)
	a.hostMu.Unlock()
}

func (a *Agent) baseTags() map[string]string {
	return map[string]string{
		gossip.TagRole:    a.cfg.Role,
		gossip.TagPool:    a.cfg.Pool,
		gossip.TagPond:    a.cfg.Pond,
		gossip.TagCM:      a.condorHost(),
		gossip.TagAPI:     a.apiAddr,
		gossip.TagVersion: gossip.ProtocolVersion,
	}
}

// Sea is the agent's serf membership.
func (a *Agent) Sea() *gossip.Sea { return a.sea }

// APIAddr is the address the HTTP API listens on.
func (a *Agent) APIAddr() string { return a.apiAddr }

// Mux is the HTTP API's request multiplexer, for services that add
// endpoints before Run.
func (a *Agent) Mux() *http.ServeMux { return a.mux }

// SetTag sets (or, with an empty value, removes) one serf tag.
func (a *Agent) SetTag(key, value string) error {
	a.tagMu.Lock()
	defer a.tagMu.Unlock()
	tags := a.sea.LocalMember().Tags
	if value == "" && key != gossip.TagPool && key != gossip.TagPond {
		delete(tags, key)
	} else {
		tags[key] = value
	}
	return a.sea.SetTags(tags)
}

// SetTags sets several tags in one serf update; an empty value removes a
// tag (pool and pond are kept, empty).
func (a *Agent) SetTags(update map[string]string) error {
	a.tagMu.Lock()
	defer a.tagMu.Unlock()
	tags := a.sea.LocalMember().Tags
	for key, value := range update {
		if value == "" && key != gossip.TagPool && key != gossip.TagPond {
			delete(tags, key)
		} else {
			tags[key] = value
		}
	}
	return a.sea.SetTags(tags)
}

// Leave asks a running agent to leave the sea and exit.
func (a *Agent) Leave() { a.once.Do(func() { close(a.leave) }) }

// Run joins the sea, serves the API and records agent.json, until ctx is
// done or Leave is called; then it leaves the sea gracefully and shuts
// down.
func (a *Agent) Run(ctx context.Context) error {
	srv := &http.Server{Handler: a.mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: nil}
	srvErr := make(chan error, 1)
	go func() { srvErr <- srv.Serve(a.apiLn) }()

	if a.cfg.DataDir != "" {
		if err := a.writeInfo(); err != nil {
			srv.Close()
			a.sea.Shutdown()
			return err
		}
	}
	a.logger.Info("agent started", "name", a.cfg.Name, "api", a.apiAddr, "gossip", a.sea.GossipAddr(),
		"pool", a.cfg.Pool, "role", a.cfg.Role, "encrypted", a.sea.Encrypted())

	joinCtx, cancelJoin := context.WithCancel(ctx)
	defer cancelJoin()
	var wg sync.WaitGroup
	if len(a.cfg.Join) > 0 {
		initial := 500 * time.Millisecond
		if a.cfg.GossipProfile == "fast" || a.cfg.GossipProfile == "local" {
			initial = 100 * time.Millisecond
		}
		wg.Go(func() {
			if _, err := a.sea.Join(joinCtx, a.cfg.Join, initial); err != nil && joinCtx.Err() == nil {
				a.logger.Error("join failed", "err", err)
			}
		})
	}

	var runErr error
	select {
	case <-ctx.Done():
		a.logger.Info("signalled; leaving the sea")
	case <-a.leave:
		a.logger.Info("asked to leave the sea")
	case err := <-srvErr:
		runErr = fmt.Errorf("API server: %w", err)
	case <-a.sea.ShutdownCh():
		runErr = errors.New("serf shut down")
	}
	cancelJoin()
	wg.Wait()
	if err := a.sea.Leave(); err != nil {
		a.logger.Warn("leave failed", "err", err)
	}
	if err := a.sea.Shutdown(); err != nil {
		a.logger.Warn("serf shutdown failed", "err", err)
	}
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
	}
	if a.cfg.DataDir != "" {
		os.Remove(filepath.Join(a.cfg.DataDir, InfoFile))
	}
	a.logger.Info("agent stopped")
	return runErr
}

func (a *Agent) writeInfo() error {
	info := Info{Name: a.cfg.Name, PID: os.Getpid(), API: a.apiAddr, Gossip: a.sea.GossipAddr(), Started: a.started}
	data, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return err
	}
	path := filepath.Join(a.cfg.DataDir, InfoFile)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// Self describes the agent.
func (a *Agent) Self() Self {
	lm := a.sea.LocalMember()
	return Self{
		Name:       a.cfg.Name,
		API:        a.apiAddr,
		Gossip:     a.sea.GossipAddr(),
		Pool:       lm.Tags[gossip.TagPool],
		Pond:       lm.Tags[gossip.TagPond],
		Role:       lm.Tags[gossip.TagRole],
		CondorHost: lm.Tags[gossip.TagCM],
		PID:        os.Getpid(),
		Started:    a.started,
		Encrypted:  a.sea.Encrypted(),
		Tags:       lm.Tags,
		Attributes: a.attrs,
		Config:     a.cfg.Knobs,
	}
}

// Hook plugs a service into the agent. It is called after the agent has
// bound its sockets and before it joins the sea and serves its API; it may
// add endpoints to Mux, set tags with SetTag, subscribe to the sea's events
// and start goroutines, which must stop when ctx is done (ctx ends when the
// agent stops). An error stops the agent.
type Hook func(ctx context.Context, a *Agent) error

// Main runs the agent with command-line arguments args (without the
// "agent" word) until ctx is done or the agent is told to leave, and returns
// the process exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return MainWith(ctx, args, stdout, stderr)
}

// MainWith is Main with services plugged in through hooks.
func MainWith(ctx context.Context, args []string, stdout, stderr io.Writer, hooks ...Hook) int {
	cfg, err := ParseArgs(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "pondctl agent: %v\n", err)
		return 1
	}
	level := slog.LevelInfo
	if cfg.LogLevel != "" {
		if err := level.UnmarshalText([]byte(cfg.LogLevel)); err != nil {
			fmt.Fprintf(stderr, "pondctl agent: -log-level %q: %v\n", cfg.LogLevel, err)
			return 1
		}
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})).With("agent", cfg.Name)
	a, err := New(ctx, cfg, logger)
	if err != nil {
		fmt.Fprintf(stderr, "pondctl agent: %v\n", err)
		return 1
	}
	svcCtx, stopServices := context.WithCancel(ctx)
	defer stopServices()
	for _, h := range hooks {
		if err := h(svcCtx, a); err != nil {
			a.sea.Shutdown()
			a.apiLn.Close()
			fmt.Fprintf(stderr, "pondctl agent: %v\n", err)
			return 1
		}
	}
	if err := a.Run(ctx); err != nil {
		fmt.Fprintf(stderr, "pondctl agent: %v\n", err)
		return 1
	}
	return 0
}

// parseTagFilter splits "k=v".
func parseTagFilter(s string) (string, string, bool) {
	k, v, ok := strings.Cut(s, "=")
	return k, v, ok && k != ""
}
