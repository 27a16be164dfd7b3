// Package testpool starts real pond nodes (a master with its daemons on a
// loopback HTTP server) inside a test process, for tests and benchmarks of
// the daemons and the tools.
package testpool

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/config"
	"github.com/pond-htc/pond/condor/daemon"
	"github.com/pond-htc/pond/condor/internal/asuser"
	"github.com/pond-htc/pond/condor/wire"
)

// Node is one running node.
type Node struct {
	Name   string
	Addr   string // API address (host:port)
	Dir    string // data directory
	Master *daemon.Master
	Config *config.Config
	srv    *http.Server
	ln     net.Listener
	stop   sync.Once
}

// Knobs are configuration settings, NAME -> value.
type Knobs map[string]string

// FastKnobs are settings that make a test pool react at once.
func FastKnobs() Knobs {
	return Knobs{"NEGOTIATOR_INTERVAL": "2", "NEGOTIATOR_MIN_INTERVAL": "0", "UPDATE_INTERVAL": "2",
		"STARTER_POLL_INTERVAL": "0.1s", "CLAIM_IDLE_TIMEOUT": "3", "NUM_CPUS": "4", "MEMORY": "4096", "DISK": "10000000"}
}

// Config builds a configuration from defaults and knobs (later maps win).
func Config(tb testing.TB, knobs ...Knobs) *config.Config {
	tb.Helper()
	cfg, err := ConfigErr(knobs...)
	if err != nil {
		tb.Fatal(err)
	}
	return cfg
}

// ConfigErr is Config without a testing.TB.
func ConfigErr(knobs ...Knobs) (*config.Config, error) {
	cfg := config.New(config.Options{})
	merged := Knobs{}
	for _, k := range knobs {
		for n, v := range k {
			merged[n] = v
		}
	}
	names := make([]string, 0, len(merged))
	for n := range merged {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if err := cfg.Set(n, merged[n]); err != nil {
			return nil, fmt.Errorf("setting %s: %w", n, err)
		}
	}
	return cfg, nil
}

// Start starts a node named name listening on addr ("127.0.0.1:0" for any
// port) with the given knobs on top of FastKnobs. The node stops when the
// test ends. Its data directory is readable by other users so that jobs
// may run as an unprivileged user. Its schedd acts for the made-up owners
// of tests (those without a local account) with the test's own rights.
func Start(tb testing.TB, name, addr, dir string, attrs map[string]string, knobs ...Knobs) *Node {
	tb.Helper()
	if dir == "" {
		d, err := os.MkdirTemp("", "pond-node-")
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { os.RemoveAll(d) })
		dir = d
	}
	n, err := StartErr(name, addr, dir, attrs, Config(tb, append([]Knobs{FastKnobs()}, knobs...)...))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { n.Stop() })
	return n
}

// testAccount is the account a test pool's schedd acts as for a job's
// owner: the local account of that name, or, for the made-up owners of
// tests (alice, bob), the test's own rights.
func testAccount(owner string) (*asuser.Account, error) {
	a, err := asuser.Lookup(owner)
	if errors.Is(err, asuser.ErrNoAccount) {
		return nil, nil
	}
	return a, err
}

// StartErr is Start without a testing.TB: dir "" makes a temporary
// directory.
func StartErr(name, addr, dir string, attrs map[string]string, cfg *config.Config) (*Node, error) {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listening: %w", err)
	}
	if dir == "" {
		if dir, err = os.MkdirTemp("", "pond-node-"); err != nil {
			ln.Close()
			return nil, err
		}
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		ln.Close()
		return nil, err
	}
	n := &Node{Name: name, Addr: ln.Addr().String(), Dir: dir, Config: cfg, ln: ln}
	m, err := daemon.Start(context.Background(), daemon.Options{Config: cfg, Name: name, Address: n.Addr, DataDir: dir, Attrs: attrs,
		Account: testAccount})
	if err != nil {
		ln.Close()
		return nil, err
	}
	n.Master = m
	mux := http.NewServeMux()
	mux.Handle(wire.PathPrefix, m.Handler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	n.srv = srv
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintln(os.Stderr, "testpool: serving:", err)
		}
	}()
	return n, nil
}

// Stop stops the node's daemons and its server.
func (n *Node) Stop() {
	n.stop.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_ = n.Master.Stop(ctx)
		_ = n.srv.Shutdown(ctx)
	})
}

// Client returns a wire client of the node with its pool token.
func (n *Node) Client() *wire.Client {
	tok, _ := wire.PoolToken(n.Config)
	return wire.NewClient(n.Addr, tok)
}

// Eventually polls cond every 20ms until it holds or timeout passes.
func Eventually(tb testing.TB, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
