// Package testpool starts real pond nodes (a master with its daemons on a
// loopback HTTP server) inside a test process, for tests and benchmarks of
// the daemons and the tools. The nodes check tokens as an agent's daemons
// do, signed by a key every test pool shares (Verifier); each node presents
// a token of its own (subject "node/NAME", DAEMON), and tests make the
// tokens of their users and administrators with Token.
package testpool

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/auth"
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
	ln     *connsListener
	stop   sync.Once
	// requests counts the requests the node served, by path.
	requests sync.Map // string -> *atomic.Int64
}

// Requests returns how many requests the node served so far, by path
// (wire.PathPrefix stripped): the calls other daemons (and clients) made
// to it, for tests and benchmarks that count the calls a job costs.
func (n *Node) Requests() map[string]int64 {
	out := map[string]int64{}
	n.requests.Range(func(k, v any) bool {
		out[k.(string)] = v.(*atomic.Int64).Load()
		return true
	})
	return out
}

// count counts a request to path.
func (n *Node) count(path string) {
	path = strings.TrimPrefix(path, wire.PathPrefix)
	v, ok := n.requests.Load(path)
	if !ok {
		v, _ = n.requests.LoadOrStore(path, new(atomic.Int64))
	}
	v.(*atomic.Int64).Add(1)
}

// connsListener is a listener that can close the connections it accepted.
type connsListener struct {
	net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func (l *connsListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.mu.Lock()
		l.conns = append(l.conns, c)
		l.mu.Unlock()
	}
	return c, err
}

// closeAll closes the listener and every connection it accepted.
func (l *connsListener) closeAll() {
	l.Listener.Close()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.conns {
		c.Close()
	}
}

// MoveTo serves the node at a new address, addr ("127.0.0.1:0" for a
// free port), and tells its daemons (daemon.Master.SetAddress), as a
// worker whose relay gave it another port: the old address stops
// answering at once, connections to it included.
func (n *Node) MoveTo(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listening: %w", err)
	}
	cl := &connsListener{Listener: ln}
	go func() {
		if err := n.srv.Serve(cl); err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, net.ErrClosed) {
			fmt.Fprintln(os.Stderr, "testpool: serving:", err)
		}
	}()
	old := n.ln
	n.ln, n.Addr = cl, ln.Addr().String()
	n.Master.SetAddress(n.Addr)
	old.closeAll()
	return nil
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
	return StartWith(name, addr, dir, attrs, cfg, nil)
}

// StartWith is StartErr with more of the master's options: with sets
// them on top of what StartErr sets (nil sets nothing).
func StartWith(name, addr, dir string, attrs map[string]string, cfg *config.Config, with func(*daemon.Options)) (*Node, error) {
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
	n := &Node{Name: name, Addr: ln.Addr().String(), Dir: dir, Config: cfg, ln: &connsListener{Listener: ln}}
	tok, err := TokenErr("node/"+name, time.Hour, auth.Daemon)
	if err != nil {
		ln.Close()
		return nil, err
	}
	opts := daemon.Options{Config: cfg, Name: name, Address: n.Addr, DataDir: dir, Attrs: attrs,
		Verifier: Verifier(), Token: func() string { return tok }, Account: testAccount}
	if with != nil {
		with(&opts)
	}
	m, err := daemon.Start(context.Background(), opts)
	if err != nil {
		ln.Close()
		return nil, err
	}
	n.Master = m
	mux := http.NewServeMux()
	mux.Handle(wire.PathPrefix, m.Handler())
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.count(r.URL.Path)
		mux.ServeHTTP(w, r)
	}), ReadHeaderTimeout: 10 * time.Second}
	n.srv = srv
	first := n.ln
	go func() {
		if err := srv.Serve(first); err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, net.ErrClosed) {
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

// Client returns a wire client of the node presenting an administrator's
// token (subject "admin", scopes ADMINISTRATOR and DAEMON): it may do
// anything on the daemons' wire.
func (n *Node) Client() *wire.Client {
	tok, err := TokenErr("admin", time.Hour, auth.Administrator, auth.Daemon)
	if err != nil {
		panic(err) // a fixed key and valid claims: cannot fail
	}
	return wire.NewClient(n.Addr, tok)
}

// Issuer is the issuer of a test pool's tokens.
const Issuer = "testpool"

// signingKey is the key of every test pool: derived from a fixed seed, so
// that the nodes of a test agree on it without sharing a file. It is no
// secret; test pools listen on loopback.
func signingKey() *auth.SigningKey {
	seed := sha256.Sum256([]byte("pond testpool signing key"))
	k, err := auth.SigningKeyFromSeed(seed[:])
	if err != nil {
		panic(err) // a seed of the right size: cannot fail
	}
	return k
}

// Verifier checks the tokens of test pools, as every node Start starts
// does: those Token and TokenErr make.
func Verifier() *auth.Verifier {
	return &auth.Verifier{Issuer: Issuer, Keys: []ed25519.PublicKey{signingKey().Public()}}
}

// WriteAuthority makes workDir's authority (auth.AuthorityDir) the test
// pools' own, of their key and issuer, so that a client run in workDir
// (auth.FindToken) makes tokens the test pools accept.
func WriteAuthority(tb testing.TB, workDir string) {
	tb.Helper()
	dir := filepath.Join(workDir, filepath.FromSlash(auth.AuthorityDir))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		tb.Fatal(err)
	}
	k := signingKey()
	if err := auth.WritePublicKeys(filepath.Join(dir, auth.TrustedKeysFile), k.Public()); err != nil {
		tb.Fatal(err)
	}
	if err := auth.WriteSigningKey(filepath.Join(dir, auth.SigningKeyFile), k); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "authority.json"), []byte(`{"issuer": "`+Issuer+`"}`+"\n"), 0o600); err != nil {
		tb.Fatal(err)
	}
	if a, err := auth.OpenAuthority(dir); err != nil || a.Issuer() != Issuer {
		tb.Fatalf("test authority in %s: %v", dir, err)
	}
}

// Token makes a token the nodes of test pools accept, for subject with
// scopes, valid for an hour. A node's own token is "node/NAME" with DAEMON.
func Token(tb testing.TB, subject string, scopes ...auth.Scope) string {
	tb.Helper()
	tok, err := TokenErr(subject, time.Hour, scopes...)
	if err != nil {
		tb.Fatal(err)
	}
	return tok
}

// TokenErr is Token without a testing.TB, valid for lifetime (negative:
// already expired).
func TokenErr(subject string, lifetime time.Duration, scopes ...auth.Scope) (string, error) {
	now := time.Now()
	iat := now
	if lifetime < 0 {
		iat = now.Add(2 * lifetime)
	}
	return auth.Mint(signingKey(), auth.Claims{Issuer: Issuer, Subject: subject, Scopes: scopes, IssuedAt: iat, Expires: now.Add(lifetime)})
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
