package tree

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/ring"
)

// ServerConfig configures a Node.
type ServerConfig struct {
	// Name is the node's unique name in the sea (its serf name).
	Name string
	// Listen is the TCP address to serve tree queries on; port 0 picks
	// a free port. Default "127.0.0.1:0".
	Listen string
	// Listener, if set, is served instead of a listener bound to Listen:
	// its Addr is the address advertised (a worker behind a relay serves
	// the connections its tunnel hands it).
	Listener net.Listener
	// Evaluator matches queries against the node's machine ad.
	Evaluator Evaluator
	// Logger defaults to discarding.
	Logger *slog.Logger
	// Table sizes routing tables; every node of a sea must agree.
	Table ring.TableConfig
	// HopTimeout is passed to the engine (see Config.HopTimeout).
	HopTimeout time.Duration
	// RepairRounds is passed to the engine (see Config.RepairRounds).
	RepairRounds int
	// TCP configures the transport.
	TCP TCPConfig
}

// Server is an Engine wired to a MemberRouter and a listening TCPTransport:
// what an agent hosts. Feed it the membership with SetMembers whenever
// serf reports a change, advertise Addr in the TagAddr tag, and start
// queries with Query.
type Server struct {
	Engine    *Engine
	Router    *MemberRouter
	Transport *TCPTransport
	addr      string
	metrics   *queryMetrics
}

// NewServer starts serving tree queries for the named node.
func NewServer(cfg ServerConfig) (*Server, error) {
	if cfg.Name == "" {
		return nil, errors.New("tree server: ServerConfig.Name is required")
	}
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:0"
	}
	if cfg.TCP.Logger == nil {
		cfg.TCP.Logger = cfg.Logger
	}
	tr := NewTCPTransport(cfg.TCP)
	rt := NewMemberRouter(ring.NewMember(cfg.Name, ""), cfg.Table)
	e, err := NewEngine(Config{Router: rt, Transport: tr, Evaluator: cfg.Evaluator, Logger: cfg.Logger, Table: cfg.Table, HopTimeout: cfg.HopTimeout, RepairRounds: cfg.RepairRounds})
	if err != nil {
		return nil, fmt.Errorf("tree server %s: %w", cfg.Name, err)
	}
	var addr string
	if cfg.Listener != nil {
		addr, err = tr.Serve(cfg.Listener, e)
	} else {
		addr, err = tr.Listen(cfg.Listen, e)
	}
	if err != nil {
		return nil, fmt.Errorf("tree server %s: %w", cfg.Name, err)
	}
	rt.SetSelfAddr(addr)
	return &Server{Engine: e, Router: rt, Transport: tr, addr: addr, metrics: newQueryMetrics()}, nil
}

// Addr returns the address the node serves tree queries on.
func (s *Server) Addr() string { return s.addr }

// SetMembers replaces the membership: every live member with its name and
// the address from its TagAddr tag (members without one cannot be asked
// and should be left out).
func (s *Server) SetMembers(members []ring.Member) { s.Router.SetMembers(members) }

// KeepConnected keeps a connection open to every member of the node's
// routing table, dialling those it lacks every interval until ctx ends:
// the members a query hands its regions to are then connected already,
// and the query pays no connection set-up on its critical path (over TLS,
// a mutual handshake costs a millisecond or more of CPU at each end).
func (s *Server) KeepConnected(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		self := s.Router.Self().Name
		for _, m := range s.Router.Table() {
			if ctx.Err() != nil {
				return
			}
			if m.Name != self && m.Addr != "" {
				_ = s.Transport.Connect(m.Addr) // a failed peer is the failure detector's business
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Query runs q with this node as root; see Engine.Query.
func (s *Server) Query(ctx context.Context, q api.Query) (*api.Answer, error) {
	start := time.Now()
	a, err := s.Engine.Query(ctx, q)
	s.metrics.observe(time.Since(start), a, err)
	return a, err
}

// Close stops serving and closes the node's connections.
func (s *Server) Close() error { return s.Transport.Close() }
