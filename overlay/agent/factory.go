package agent

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
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
	"github.com/pond-htc/pond/overlay/glidein/ec2"
	"github.com/pond-htc/pond/overlay/glidein/slurm"
	"github.com/pond-htc/pond/overlay/glidein/ssh"
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
	var refresh func(context.Context, factory.Entry, string) (map[string][]byte, time.Time, error)
	if a.tokens != nil {
		refresh = func(ctx context.Context, e factory.Entry, id string) (map[string][]byte, time.Time, error) {
			tok, exp, err := a.tokens.Token(e, id)
			if err != nil {
				return nil, time.Time{}, err
			}
			files := map[string][]byte{factory.TokenFile: []byte(tok + "\n")}
			if a.subCA != nil {
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
		Sites:          NewSite,
		Launch: func(ctx context.Context, e factory.Entry, id string) (glidein.Request, error) {
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

// factoryTokens reads the factory's delegated key (-factory-key) and
// finds its limits among the delegated keys the agent trusts, and its
// delegated CA (-factory-ca), which the sea's CA must have issued.
func (a *Agent) factoryTokens() error {
	if a.cfg.FactoryCA != "" {
		if a.cfg.TLSCA == "" {
			return errors.New("-factory-ca: the agent speaks no TLS (-tls-ca)")
		}
		a.subCA = &factoryCA{path: a.cfg.FactoryCA, caFile: a.cfg.TLSCA}
		if _, err := a.subCA.get(); err != nil {
			return err
		}
	}
	if a.cfg.FactoryKey == "" {
		return nil
	}
	if a.verifier == nil {
		return errors.New("-factory-key: the agent has no trusted keys to find the key's limits in")
	}
	k, err := auth.ReadSigningKey(a.cfg.FactoryKey)
	if err != nil {
		return fmt.Errorf("-factory-key: %w", err)
	}
	for _, d := range a.verifier.Delegated {
		if d.Key.Equal(k.Public()) {
			a.tokens = &factory.Tokens{Key: k, Limits: d.Limits, Issuer: a.cfg.TokenIssuer}
			return nil
		}
	}
	return fmt.Errorf("-factory-key %s: not a delegated key of the trusted keys %s", a.cfg.FactoryKey, a.cfg.TrustedKeys)
}

// NewSite builds the site of a factory entry from its configuration:
// kind ssh (ssh.Config as JSON), slurm (slurm.Config as JSON) or aws
// (ec2.Config as JSON). An aws entry carries no AWS credential: the
// agent's own come from the SDK's default chain on its machine (the
// environment, a shared profile named by the config's Profile, its
// instance or container role).
func NewSite(e factory.Entry) (glidein.Site, error) {
	dec := func(v any) error {
		if len(e.Site.Config) == 0 {
			return nil
		}
		d := json.NewDecoder(strings.NewReader(string(e.Site.Config)))
		d.DisallowUnknownFields()
		if err := d.Decode(v); err != nil {
			return fmt.Errorf("site.config: %w", err)
		}
		return nil
	}
	switch e.Site.Kind {
	case "ssh":
		var c ssh.Config
		if err := dec(&c); err != nil {
			return nil, err
		}
		return ssh.New(c)
	case "slurm":
		var c slurm.Config
		if err := dec(&c); err != nil {
			return nil, err
		}
		return slurm.New(c)
	case "aws":
		var c ec2.Config
		if err := dec(&c); err != nil {
			return nil, err
		}
		return ec2.New(context.Background(), c)
	}
	return nil, fmt.Errorf("site.kind %q: want ssh, slurm or aws", e.Site.Kind)
}

// glideinRequest is how the factory starts glidein id of entry e: this
// agent's binary as `pondctl agent -glidein ID`, joining this agent's sea
// and reporting to its pool's central manager.
func (a *Agent) glideinRequest(bin string, e factory.Entry, id string) (glidein.Request, error) {
	t := e.Template
	// An EC2 glidein's agent fetches its files from SSM into its data
	// directory (-credentials), where its arguments name them.
	dataDir := "{dir}/data"
	if e.Site.Kind == "aws" {
		dataDir = "{dir}"
	}
	args := []string{"agent", "-name", id, "-pool", a.cfg.Pool, "-condor-host", a.CondorHost(),
		"-join", a.sea.GossipAddr(), "-data-dir", dataDir,
		"-glidein", id, "-lifetime", time.Duration(t.Lifetime).String()}
	files := map[string][]byte{}
	if a.clientTLS != nil {
		if a.subCA == nil {
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
	case a.tokens == nil:
		return glidein.Request{}, errors.New("the sea requires tokens, and the agent has no -factory-key to sign glideins' tokens with")
	default:
		tok, _, err := a.tokens.Token(e, id)
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

// glideinCert issues glidein id of entry e a certificate with the
// factory's delegated CA, lasting the entry's lifetime and the tokens'
// margin (within the CA's own life), into files: the certificate chain
// and a key made for it alone, both only in the request's files.
func (a *Agent) glideinCert(files map[string][]byte, e factory.Entry, id string) error {
	sub, err := a.subCA.get()
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
		wire.WriteJSON(w, http.StatusOK, f.Status())
	})
	m.handle("PUT "+api.PathFactoryEntries+"{name}", func(w http.ResponseWriter, r *http.Request) {
		var raw json.RawMessage
		if err := wire.ReadJSON(r, &raw); err != nil {
			wire.WriteError(w, http.StatusBadRequest, fmt.Errorf("body: %w", err))
			return
		}
		e, err := factory.ParseEntry(raw)
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
