package agent

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/condor/daemon"
	"github.com/pond-htc/pond/condor/wire"
	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/factory"
	"github.com/pond-htc/pond/overlay/glidein"
	"github.com/pond-htc/pond/overlay/glidein/kinds"
	"github.com/pond-htc/pond/overlay/knobs"
)

// startFactory starts the pilot factory on an agent that runs its pool's
// collector, with a data directory to keep its entries and journal in
// (DATA_DIR/factory). It has no entries until PUT /v1/factory/entries/NAME
// gives some, and then keeps their glideins with no pondctl running.
func (a *Agent) startFactory() error {
	a.metrics = prometheus.NewRegistry()
	if a.cfg.DataDir == "" || a.cfg.Pool == "" || !a.daemons.runs(daemon.Collector) {
		return nil
	}
	bin, err := os.Executable()
	if err != nil {
		return fmt.Errorf("factory: the agent's binary: %w", err)
	}
	if err := a.factoryTokens(); err != nil {
		return err
	}
	var refresh func(context.Context, api.FactoryEntrySpec, string) (map[string][]byte, time.Time, error)
	if a.verifier != nil || a.cfg.TLSCA != "" {
		// The credentials may come later (PUT /v1/factory/credentials).
		// A sea that speaks TLS but requires no tokens renews the
		// glideins' certificates alone.
		refresh = func(ctx context.Context, e api.FactoryEntrySpec, id string) (map[string][]byte, time.Time, error) {
			tokens, subCA := a.factoryCreds()
			files := map[string][]byte{}
			var exp time.Time
			if a.verifier != nil {
				if tokens == nil {
					return nil, time.Time{}, errors.New("the sea requires tokens, and the agent has no -factory-key to sign glideins' tokens with")
				}
				tok, texp, err := tokens.Token(e, id)
				if err != nil {
					return nil, time.Time{}, err
				}
				files[factory.TokenFile], exp = []byte(tok+"\n"), texp
			}
			if subCA == nil && a.cfg.TLSCA != "" {
				return nil, time.Time{}, errors.New("the sea speaks TLS, and the agent has no -factory-ca to issue glideins' certificates with")
			}
			if subCA != nil {
				// The certificate is renewed with the token (a new key
				// too): the agent reads both files again, keeping the
				// old pair until the new one matches.
				if err := a.glideinCert(files, e, id); err != nil {
					return nil, time.Time{}, err
				}
			}
			return files, exp, nil
		}
	}
	r := knobs.Reader(a.cfg.Knob)
	var opts factory.Options
	for _, d := range []struct {
		knob string
		to   *time.Duration
	}{{knobs.FactoryInterval, &opts.Interval}, {knobs.FactorySubmitGrace, &opts.SubmitGrace},
		{knobs.FactoryHeartbeatGrace, &opts.HeartbeatGrace}, {knobs.FactoryJoinTimeout, &opts.JoinTimeout}} {
		if *d.to, err = r.Duration(d.knob); err != nil {
			return err
		}
	}
	if opts.Totals.MaxQueued, err = r.Int(knobs.FactoryMaxQueued); err != nil {
		return err
	}
	if opts.Totals.MaxRunning, err = r.Int(knobs.FactoryMaxRunning); err != nil {
		return err
	}
	f, err := factory.New(factory.Options{
		Interval:       opts.Interval,
		SubmitGrace:    opts.SubmitGrace,
		HeartbeatGrace: opts.HeartbeatGrace,
		JoinTimeout:    opts.JoinTimeout,
		Totals:         opts.Totals,
		Refresh:        refresh,
		Pool:           a.cfg.Pool,
		DataDir:        filepath.Join(a.cfg.DataDir, "factory"),
		Source:         &factory.WirePool{CentralManager: a.CondorHost, Token: a.token, TLS: a.clientTLS},
		Sites:          siteMaker(a.logger),
		Launch: func(ctx context.Context, e api.FactoryEntrySpec, id string) (glidein.Request, error) {
			return a.glideinRequest(bin, e, id)
		},
		Logger: a.logger,
	})
	if err != nil {
		return err
	}
	if err := a.metrics.Register(f); err != nil {
		return fmt.Errorf("factory metrics: %w", err)
	}
	a.factory = f
	a.bg.Go(func() {
		f.Run(a.ctx)
		f.Close()
	})
	return nil
}

// factoryCreds returns the factory's delegated key and CA, nil when it
// has none.
func (a *Agent) factoryCreds() (*factory.Tokens, *factoryCA) {
	a.factoryMu.Lock()
	defer a.factoryMu.Unlock()
	return a.tokens, a.subCA
}

// Where PUT /v1/factory/credentials keeps the factory's delegated key and
// CA, in the agent's data directory (0700, the files 0600): read at the
// next start when no -factory-key or -factory-ca names others.
const (
	factoryCredsDir    = "factory-credentials"
	factoryCredsKey    = "factory.key"
	factoryCredsCAFile = "factory-ca.pem"
)

// factoryTokens reads the factory's delegated key (-factory-key, or the
// one a PUT /v1/factory/credentials kept in the data directory) and
// finds its limits among the delegated keys the agent trusts, and its
// delegated CA (-factory-ca, or the one kept), which the sea's CA must
// have issued.
func (a *Agent) factoryTokens() error {
	keyPath, caPath := a.cfg.FactoryKey, a.cfg.FactoryCA
	kept := filepath.Join(a.cfg.DataDir, factoryCredsDir)
	// Kept credentials that are no longer good (a key taken back, a CA
	// of another sea) are left unused with a warning: unlike a flag, the
	// user did not name them at this start.
	keptBad := func(what string, err error) {
		a.logger.Warn("factory: the kept "+what+" is not used", "dir", kept, "err", err)
	}
	keyKept, caKept := false, false
	if keyPath == "" {
		if p := filepath.Join(kept, factoryCredsKey); fileExists(p) {
			keyPath, keyKept = p, true
		}
	}
	if caPath == "" {
		if p := filepath.Join(kept, factoryCredsCAFile); fileExists(p) {
			caPath, caKept = p, true
		}
	}
	var subCA *factoryCA
	if caPath != "" {
		var err error
		if a.cfg.TLSCA == "" {
			err = errors.New("-factory-ca: the agent speaks no TLS (-tls-ca)")
		} else {
			subCA = &factoryCA{path: caPath, caFile: a.cfg.TLSCA}
			_, err = subCA.get()
		}
		switch {
		case err != nil && caKept:
			subCA = nil
			keptBad("delegated CA", err)
		case err != nil:
			return err
		}
	}
	var tokens *factory.Tokens
	if keyPath != "" {
		var err error
		tokens, err = a.factoryKey(keyPath)
		switch {
		case err != nil && keyKept:
			tokens = nil
			keptBad("delegated key", err)
		case err != nil:
			return err
		}
	}
	a.factoryMu.Lock()
	a.tokens, a.subCA = tokens, subCA
	a.factoryMu.Unlock()
	return nil
}

// fileExists reports whether path names a file.
func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// factoryKey reads the delegated key at path and finds its limits among
// the delegated keys the agent trusts (the trusted keys file read again:
// a key delegated after the agent started is there).
func (a *Agent) factoryKey(path string) (*factory.Tokens, error) {
	if a.verifier == nil {
		return nil, errors.New("-factory-key: the agent has no trusted keys to find the key's limits in")
	}
	k, err := auth.ReadSigningKey(path)
	if err != nil {
		return nil, fmt.Errorf("-factory-key: %w", err)
	}
	delegated := a.verifier.Delegated
	if _, ds, err := auth.ReadTrustedKeys(a.cfg.TrustedKeys); err == nil {
		delegated = append(ds, delegated...)
	}
	for _, d := range delegated {
		if d.Key.Equal(k.Public()) {
			return &factory.Tokens{Key: k, Limits: d.Limits, Issuer: a.cfg.TokenIssuer}, nil
		}
	}
	return nil, fmt.Errorf("-factory-key %s: not a delegated key of the trusted keys %s", path, a.cfg.TrustedKeys)
}

// NewSite builds the site of a factory entry from its configuration:
// its kind (overlay/glidein/kinds) makes it again from the configuration
// the site's Describe gave. An aws entry carries no AWS credential: the
// agent's own come from the SDK's default chain on its machine (the
// environment, a shared profile named by the config's Profile, its
// instance or container role).
func NewSite(e api.FactoryEntrySpec) (glidein.Site, error) {
	return kinds.Registry().Open(context.Background(), e.Site.Kind, e.Site.Config, glidein.KindEnv{})
}

// siteMaker returns the factory's Sites: NewSite, whose sites share what
// the sites of one process share (EC2's: one cache of the spot price
// history, asked once per ec2.DefaultSpotTTL, not every cycle), and log
// what their SDK says to logger.
func siteMaker(logger *slog.Logger) func(api.FactoryEntrySpec) (glidein.Site, error) {
	reg, shared := kinds.Registry(), &glidein.Shared{}
	return func(e api.FactoryEntrySpec) (glidein.Site, error) {
		return reg.Open(context.Background(), e.Site.Kind, e.Site.Config, glidein.KindEnv{Logger: logger, Shared: shared})
	}
}

// glideinRequest is how the factory starts glidein id of entry e: this
// agent's binary as `pondctl agent -glidein ID`, joining this agent's sea
// and reporting to its pool's central manager.
func (a *Agent) glideinRequest(bin string, e api.FactoryEntrySpec, id string) (glidein.Request, error) {
	t := e.Template
	// An EC2 glidein's agent fetches its files from SSM into its data
	// directory (-credentials), where its arguments name them.
	dataDir := "{dir}/data"
	if k, ok := kinds.Registry().Lookup(e.Site.Kind); ok && k.FetchesFiles {
		dataDir = "{dir}"
	}
	args := []string{"agent", "-name", id, "-pool", a.cfg.Pool, "-condor-host", a.glideinCondorHost(),
		"-join", a.sea.GossipAddr(), "-data-dir", dataDir,
		"-glidein", id, "-lifetime", time.Duration(t.Lifetime).String()}
	files := map[string][]byte{}
	tokens, subCA := a.factoryCreds()
	if a.clientTLS != nil {
		if subCA == nil {
			return glidein.Request{}, errors.New("the sea speaks TLS, and the agent has no -factory-ca to issue glideins' certificates with")
		}
		if err := a.glideinCert(files, e, id); err != nil {
			return glidein.Request{}, err
		}
		ca, err := os.ReadFile(a.cfg.TLSCA)
		if err != nil {
			return glidein.Request{}, fmt.Errorf("-tls-ca: %w", err)
		}
		files[auth.CACertFile] = ca
		args = append(args, "-tls-cert", "{dir}/"+auth.NodeCertFile, "-tls-key", "{dir}/"+auth.NodeKeyFile,
			"-tls-ca", "{dir}/"+auth.CACertFile)
	}
	switch {
	case a.verifier == nil:
		args = append(args, "-insecure-api")
	case tokens == nil:
		return glidein.Request{}, errors.New("the sea requires tokens, and the agent has no -factory-key to sign glideins' tokens with")
	default:
		tok, _, err := tokens.Token(e, id)
		if err != nil {
			return glidein.Request{}, err
		}
		trusted, err := os.ReadFile(a.cfg.TrustedKeys)
		if err != nil {
			return glidein.Request{}, fmt.Errorf("trusted keys: %w", err)
		}
		files[factory.TokenFile] = []byte(tok + "\n")
		files["trusted.pem"] = trusted
		args = append(args, "-token-file", "{dir}/"+factory.TokenFile, "-trusted-keys", "{dir}/trusted.pem",
			"-token-issuer", a.cfg.TokenIssuer)
	}
	if t.IdleTimeout > 0 {
		args = append(args, "-idle-timeout", time.Duration(t.IdleTimeout).String())
	}
	// The glidein's startd offers what the factory matched jobs against,
	// not the whole node it lands on.
	conf := fmt.Sprintf("NUM_CPUS = %d\nMEMORY = %d\n", t.CPUs, t.MemoryMB)
	if t.Slots > 1 {
		conf += fmt.Sprintf("NUM_SLOTS = %d\n", t.Slots)
	}
	if a.cfg.Encrypt != "" {
		// The sea's gossip key, in the glidein's private configuration
		// file (0600), never on its command line.
		conf += fmt.Sprintf("%s = %s\n", knobs.Encrypt, a.cfg.Encrypt)
	}
	files["condor_config"] = []byte(conf)
	args = append(args, "-config", "{dir}/condor_config")
	if len(t.Validate) > 0 {
		data, err := json.Marshal(t.Validate)
		if err != nil {
			return glidein.Request{}, err
		}
		files["validate.json"] = data
		args = append(args, "-validate", "{dir}/validate.json")
	}
	for k, v := range t.Attributes {
		args = append(args, "-attr", k+"="+v)
	}
	args = append(args, t.AgentArgs...)
	return glidein.Request{Binary: bin, Args: args, Files: files}, nil
}

// glideinCondorHost is the central manager's API address a glidein of
// the factory is told: the pool's, or, when this agent listens on every
// address ("[::]:PORT", which names no machine to a glidein elsewhere),
// the same port on the host its gossip advertises (the address of the
// interface it reaches its peers from). An entry's agent_args may name
// another (-condor-host, the provider's central_manager_address).
func (a *Agent) glideinCondorHost() string {
	cm := a.CondorHost()
	_, port, err := net.SplitHostPort(cm)
	if err != nil || !unspecified(cm) {
		return cm
	}
	g := a.sea.GossipAddr()
	h, _, err := net.SplitHostPort(g)
	if err != nil || unspecified(g) {
		return cm
	}
	return net.JoinHostPort(h, port)
}

// glideinCert issues glidein id of entry e a certificate with the
// factory's delegated CA, lasting the entry's lifetime and the tokens'
// margin (within the CA's own life), into files: the certificate chain
// and a key made for it alone, both only in the request's files.
func (a *Agent) glideinCert(files map[string][]byte, e api.FactoryEntrySpec, id string) error {
	_, subCA := a.factoryCreds()
	if subCA == nil {
		return errors.New("the sea speaks TLS, and the agent has no -factory-ca to issue glideins' certificates with")
	}
	sub, err := subCA.get()
	if err != nil {
		return err
	}
	cert, key, err := sub.Issue(id, time.Duration(e.Template.Lifetime)+factory.DefaultTokenMargin)
	if err != nil {
		return err
	}
	files[auth.NodeCertFile], files[auth.NodeKeyFile] = cert, key
	return nil
}

// factoryRoutes serves the factory's routes on an agent that runs one,
// and the metrics on every agent.
func (a *Agent) factoryRoutes(m routeMux) {
	m.handle("GET "+api.PathMetrics, promhttp.HandlerFor(a.metrics, promhttp.HandlerOpts{}).ServeHTTP)
	if a.factory == nil {
		return
	}
	f := a.factory
	m.handle("GET "+api.PathFactory, func(w http.ResponseWriter, r *http.Request) {
		wire.WriteJSON(w, http.StatusOK, a.factoryStatus())
	})
	m.handle("PUT "+api.PathFactoryCredentials, func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil && !a.cfg.InsecureAPI {
			wire.WriteError(w, http.StatusUpgradeRequired,
				errors.New("the factory's credentials are taken only over TLS: the agent has no -tls-cert"))
			return
		}
		var creds api.FactoryCredentials
		if err := wire.ReadJSON(r, &creds); err != nil {
			wire.WriteError(w, http.StatusBadRequest, fmt.Errorf("body: %w", err))
			return
		}
		if err := a.setFactoryCredentials(creds); err != nil {
			wire.WriteError(w, http.StatusBadRequest, err)
			return
		}
		wire.WriteJSON(w, http.StatusOK, a.factoryStatus())
	})
	m.handle("PUT "+api.PathFactoryEntries+"{name}", func(w http.ResponseWriter, r *http.Request) {
		var raw json.RawMessage
		if err := wire.ReadJSON(r, &raw); err != nil {
			wire.WriteError(w, http.StatusBadRequest, fmt.Errorf("body: %w", err))
			return
		}
		e, err := api.ParseFactoryEntry(raw)
		if err == nil && e.Name != r.PathValue("name") {
			err = fmt.Errorf("entry %q: the path names %q", e.Name, r.PathValue("name"))
		}
		if err == nil {
			err = f.SetEntry(e)
		}
		if err != nil {
			wire.WriteError(w, http.StatusBadRequest, err)
			return
		}
		wire.WriteJSON(w, http.StatusOK, f.Status())
	})
	m.handle("DELETE "+api.PathFactoryEntries+"{name}", func(w http.ResponseWriter, r *http.Request) {
		if err := f.RemoveEntry(r.PathValue("name")); err != nil {
			wire.WriteError(w, http.StatusInternalServerError, err)
			return
		}
		wire.WriteJSON(w, http.StatusOK, f.Status())
	})
}

// factoryStatus is the factory's status with the credentials it holds.
func (a *Agent) factoryStatus() api.FactoryStatus {
	st := a.factory.Status()
	st.NeedsCredentials = a.verifier != nil
	tokens, subCA := a.factoryCreds()
	if tokens == nil && subCA == nil {
		return st
	}
	c := &api.FactoryCredentialsStatus{}
	if tokens != nil {
		c.KeyID, c.Prefix = tokens.Key.ID(), strings.TrimPrefix(tokens.Limits.SubjectPrefix, "node/")
	}
	if subCA != nil {
		if sub, err := subCA.get(); err == nil {
			c.CAExpires = sub.Cert.NotAfter.UTC()
		}
	}
	st.Credentials = c
	return st
}

// setFactoryCredentials checks the factory's delegated key and CA
// against the pool's glidein names (api.FactoryPrefix) and the trusted keys
// and sea's CA, keeps them in the data directory (factoryCredsDir), and
// has the factory use them at once. Nothing is kept unless both are good.
func (a *Agent) setFactoryCredentials(creds api.FactoryCredentials) error {
	want := api.FactoryPrefix(a.cfg.Pool)
	if creds.Key == "" {
		return errors.New("key: missing: the factory's delegated key is required")
	}
	if creds.CA != "" && a.cfg.TLSCA == "" {
		return errors.New("ca: the agent speaks no TLS (-tls-ca): it has no use for a delegated CA")
	}
	if creds.CA == "" && a.cfg.TLSCA != "" {
		return errors.New("ca: missing: the sea speaks TLS, and the factory needs a delegated CA to certify its glideins")
	}
	dir := filepath.Join(a.cfg.DataDir, factoryCredsDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return err
	}
	// Both are checked in files of their own before they replace the
	// kept ones.
	keyNew, caNew := filepath.Join(dir, factoryCredsKey+".new"), filepath.Join(dir, factoryCredsCAFile+".new")
	defer os.Remove(keyNew)
	defer os.Remove(caNew)
	if err := os.WriteFile(keyNew, []byte(creds.Key), 0o600); err != nil {
		return err
	}
	tokens, err := a.factoryKey(keyNew)
	if err != nil {
		return fmt.Errorf("key: %w", err)
	}
	if got := tokens.Limits.SubjectPrefix; got != "node/"+want {
		return fmt.Errorf("key: limited to subjects %q, and the glideins of pool %s are node/%s*: credentials of another pool's factory", got, a.cfg.Pool, want)
	}
	var subCA *factoryCA
	if creds.CA != "" {
		if err := os.WriteFile(caNew, []byte(creds.CA), 0o600); err != nil {
			return err
		}
		sub, err := (&factoryCA{path: caNew, caFile: a.cfg.TLSCA}).load()
		if err != nil {
			return fmt.Errorf("ca: %w", err)
		}
		if sub.Prefix != want {
			return fmt.Errorf("ca: limited to names %s*, and the glideins of pool %s are %s*: credentials of another pool's factory", sub.Prefix, a.cfg.Pool, want)
		}
		if time.Now().After(sub.Cert.NotAfter) {
			return fmt.Errorf("ca: expired at %s", sub.Cert.NotAfter.UTC().Format(time.RFC3339))
		}
	}
	keyPath, caPath := filepath.Join(dir, factoryCredsKey), filepath.Join(dir, factoryCredsCAFile)
	if err := os.Rename(keyNew, keyPath); err != nil {
		return err
	}
	if tokens, err = a.factoryKey(keyPath); err != nil {
		return err
	}
	if creds.CA != "" {
		if err := os.Rename(caNew, caPath); err != nil {
			return err
		}
		subCA = &factoryCA{path: caPath, caFile: a.cfg.TLSCA}
		if _, err := subCA.get(); err != nil {
			return err
		}
	}
	a.factoryMu.Lock()
	a.tokens, a.subCA = tokens, subCA
	a.factoryMu.Unlock()
	a.logger.Info("factory credentials set", "key", tokens.Key.ID(), "prefix", want)
	return nil
}

// factoryCA is the factory's delegated CA (-factory-ca), read again when
// its file changes, so that a renewed one (pondctl cert factory) is used
// without a restart. A file that cannot be read, or whose CA the sea's CA
// did not issue, keeps the last good one.
type factoryCA struct {
	path, caFile string

	mu    sync.Mutex
	sub   *auth.SubCA
	stamp time.Time
	size  int64
}

func (f *factoryCA) get() (*auth.SubCA, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fi, err := os.Stat(f.path)
	if err == nil && f.sub != nil && fi.ModTime().Equal(f.stamp) && fi.Size() == f.size {
		return f.sub, nil
	}
	sub, err := f.load()
	if err != nil {
		if f.sub != nil {
			return f.sub, nil
		}
		return nil, err
	}
	if fi != nil {
		f.stamp, f.size = fi.ModTime(), fi.Size()
	}
	f.sub = sub
	return sub, nil
}

// load reads the delegated CA and checks that the sea's CA issued it.
func (f *factoryCA) load() (*auth.SubCA, error) {
	sub, err := auth.ReadSubCA(f.path)
	if err != nil {
		return nil, fmt.Errorf("-factory-ca: %w", err)
	}
	roots, err := auth.ReadCertificates(f.caFile)
	if err != nil {
		return nil, fmt.Errorf("-tls-ca: %w", err)
	}
	pool := x509.NewCertPool()
	for _, c := range roots {
		pool.AddCert(c)
	}
	// At a time within its life: an expired one is reported with each
	// glidein it cannot issue for, in the factory's status, and does not
	// keep the central manager's agent from starting.
	if _, err := sub.Cert.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny},
		CurrentTime: sub.Cert.NotAfter.Add(-time.Second)}); err != nil {
		return nil, fmt.Errorf("-factory-ca %s: not a CA the sea's CA (%s) issued: %w", f.path, f.caFile, err)
	}
	return sub, nil
}
