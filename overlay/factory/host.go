package factory

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/condor/wire"
	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/glidein"
	"github.com/pond-htc/pond/overlay/glidein/kinds"
	"github.com/pond-htc/pond/overlay/knobs"
)

// HostConfig is the node a pool's pilot factory runs on: the agent of
// its central manager, whose flags and knobs these are.
type HostConfig struct {
	// Pool is the node's pool.
	Pool string
	// DataDir is the node's data directory: the factory keeps its
	// entries and journal in DataDir/factory, and the credentials PUT
	// api.PathFactoryCredentials gives it in DataDir/CredentialsDir.
	DataDir string
	// Binary is the agent's binary, which the glideins run.
	Binary string
	// TLS says the node speaks TLS (it has a certificate, -tls-cert);
	// TLSCA is the sea's CA file (-tls-ca).
	TLS   bool
	TLSCA string
	// Verifier checks the API's tokens (nil: the sea requires none);
	// TrustedKeys is its keys file, TokenIssuer the issuer of tokens.
	Verifier                 *auth.Verifier
	TrustedKeys, TokenIssuer string
	// InsecureAPI lets the credentials come without TLS.
	InsecureAPI bool
	// FactoryKey and FactoryCA are the files of the factory's delegated
	// key and CA (-factory-key, -factory-ca); "" uses those kept.
	FactoryKey, FactoryCA string
	// Encrypt is the sea's gossip key, which the glideins are given in
	// their private configuration file.
	Encrypt string
	// Knob reads the node's knobs (POND_FACTORY_*); required.
	Knob knobs.Reader
	// Source is the pool the factory reads its demand from.
	Source Pool
	// CondorHost is the central manager's address a glidein is told;
	// GossipAddr the sea's address it joins at.
	CondorHost, GossipAddr func() string
	Logger                 *slog.Logger
}

// Host runs a pool's pilot factory on its central manager's node: the
// Factory, the delegated key and CA it gives its glideins' tokens and
// certificates with, the request that starts each glidein (this agent's
// binary as `pondctl agent -glidein ID`), and the factory's routes.
type Host struct {
	cfg HostConfig
	f   *Factory

	// mu guards tokens and subCA, which PUT api.PathFactoryCredentials
	// may set while the factory runs.
	mu     sync.Mutex
	tokens *Tokens      // the factory's delegated key, with -factory-key
	subCA  *delegatedCA // the factory's delegated CA, with -factory-ca
}

// NewHost reads the factory's credentials and knobs and makes its
// Factory, with the entries and journal of DataDir/factory. It has no
// entries until PUT api.PathFactoryEntries+NAME gives some, and then keeps
// their glideins with no pondctl running.
func NewHost(cfg HostConfig) (*Host, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	h := &Host{cfg: cfg}
	if err := h.readCredentials(); err != nil {
		return nil, err
	}
	var refresh func(context.Context, api.FactoryEntrySpec, string) (map[string][]byte, time.Time, error)
	if cfg.Verifier != nil || cfg.TLSCA != "" {
		// The credentials may come later (PUT api.PathFactoryCredentials).
		// A sea that speaks TLS but requires no tokens renews the
		// glideins' certificates alone.
		refresh = func(ctx context.Context, e api.FactoryEntrySpec, id string) (map[string][]byte, time.Time, error) {
			tokens, subCA := h.creds()
			files := map[string][]byte{}
			var exp time.Time
			if cfg.Verifier != nil {
				if tokens == nil {
					return nil, time.Time{}, errors.New("the sea requires tokens, and the agent has no -factory-key to sign glideins' tokens with")
				}
				tok, texp, err := tokens.Token(e, id)
				if err != nil {
					return nil, time.Time{}, err
				}
				files[TokenFile], exp = []byte(tok+"\n"), texp
			}
			if subCA == nil && cfg.TLSCA != "" {
				return nil, time.Time{}, errors.New("the sea speaks TLS, and the agent has no -factory-ca to issue glideins' certificates with")
			}
			if subCA != nil {
				// The certificate is renewed with the token (a new key
				// too): the agent reads both files again, keeping the
				// old pair until the new one matches.
				if err := h.cert(files, e, id); err != nil {
					return nil, time.Time{}, err
				}
			}
			return files, exp, nil
		}
	}
	opts := Options{
		Refresh: refresh,
		Pool:    cfg.Pool,
		DataDir: filepath.Join(cfg.DataDir, "factory"),
		Source:  cfg.Source,
		Sites:   SiteMaker(cfg.Logger),
		Launch: func(ctx context.Context, e api.FactoryEntrySpec, id string) (glidein.Request, error) {
			return h.Request(e, id)
		},
		Logger: cfg.Logger,
	}
	r := cfg.Knob
	var err error
	for _, d := range []struct {
		knob string
		to   *time.Duration
	}{{knobs.FactoryInterval, &opts.Interval}, {knobs.FactorySubmitGrace, &opts.SubmitGrace},
		{knobs.FactoryHeartbeatGrace, &opts.HeartbeatGrace}, {knobs.FactoryJoinTimeout, &opts.JoinTimeout}} {
		if *d.to, err = r.Duration(d.knob); err != nil {
			return nil, err
		}
	}
	if opts.Totals.MaxQueued, err = r.Int(knobs.FactoryMaxQueued); err != nil {
		return nil, err
	}
	if opts.Totals.MaxRunning, err = r.Int(knobs.FactoryMaxRunning); err != nil {
		return nil, err
	}
	f, err := New(opts)
	if err != nil {
		return nil, err
	}
	h.f = f
	return h, nil
}

// Run runs the factory until ctx ends, then closes it.
func (h *Host) Run(ctx context.Context) {
	h.f.Run(ctx)
	h.f.Close()
}

// Factory is the host's Factory.
func (h *Host) Factory() *Factory { return h.f }

// creds returns the factory's delegated key and CA, nil when it has
// none.
func (h *Host) creds() (*Tokens, *delegatedCA) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.tokens, h.subCA
}

// Credentials returns the factory's delegated key and CA, nil when it
// has none (or its CA cannot be read).
func (h *Host) Credentials() (*Tokens, *auth.SubCA) {
	tokens, subCA := h.creds()
	if subCA == nil {
		return tokens, nil
	}
	sub, err := subCA.get()
	if err != nil {
		return tokens, nil
	}
	return tokens, sub
}

// Where PUT api.PathFactoryCredentials keeps the factory's delegated key and
// CA, in the agent's data directory (0700, the files 0600): read at the
// next start when no -factory-key or -factory-ca names others.
const (
	CredentialsDir     = "factory-credentials"
	CredentialsKeyFile = "factory.key"
	CredentialsCAFile  = "factory-ca.pem"
)

// readCredentials reads the factory's delegated key (-factory-key, or the
// one a PUT api.PathFactoryCredentials kept in the data directory) and
// finds its limits among the delegated keys the agent trusts, and its
// delegated CA (-factory-ca, or the one kept), which the sea's CA must
// have issued.
func (h *Host) readCredentials() error {
	keyPath, caPath := h.cfg.FactoryKey, h.cfg.FactoryCA
	kept := filepath.Join(h.cfg.DataDir, CredentialsDir)
	// Kept credentials that are no longer good (a key taken back, a CA
	// of another sea) are left unused with a warning: unlike a flag, the
	// user did not name them at this start.
	keptBad := func(what string, err error) {
		h.cfg.Logger.Warn("factory: the kept "+what+" is not used", "dir", kept, "err", err)
	}
	keyKept, caKept := false, false
	if keyPath == "" {
		if p := filepath.Join(kept, CredentialsKeyFile); fileExists(p) {
			keyPath, keyKept = p, true
		}
	}
	if caPath == "" {
		if p := filepath.Join(kept, CredentialsCAFile); fileExists(p) {
			caPath, caKept = p, true
		}
	}
	var subCA *delegatedCA
	if caPath != "" {
		var err error
		if h.cfg.TLSCA == "" {
			err = errors.New("-factory-ca: the agent speaks no TLS (-tls-ca)")
		} else {
			subCA = &delegatedCA{path: caPath, caFile: h.cfg.TLSCA}
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
	var tokens *Tokens
	if keyPath != "" {
		var err error
		tokens, err = h.readKey(keyPath)
		switch {
		case err != nil && keyKept:
			tokens = nil
			keptBad("delegated key", err)
		case err != nil:
			return err
		}
	}
	h.mu.Lock()
	h.tokens, h.subCA = tokens, subCA
	h.mu.Unlock()
	return nil
}

// fileExists reports whether path names a file.
func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// readKey reads the delegated key at path and finds its limits among
// the delegated keys the agent trusts (the trusted keys file read again:
// a key delegated after the agent started is there).
func (h *Host) readKey(path string) (*Tokens, error) {
	if h.cfg.Verifier == nil {
		return nil, errors.New("-factory-key: the agent has no trusted keys to find the key's limits in")
	}
	k, err := auth.ReadSigningKey(path)
	if err != nil {
		return nil, fmt.Errorf("-factory-key: %w", err)
	}
	delegated := h.cfg.Verifier.Delegated
	if _, ds, err := auth.ReadTrustedKeys(h.cfg.TrustedKeys); err == nil {
		delegated = append(ds, delegated...)
	}
	for _, d := range delegated {
		if d.Key.Equal(k.Public()) {
			return &Tokens{Key: k, Limits: d.Limits, Issuer: h.cfg.TokenIssuer}, nil
		}
	}
	return nil, fmt.Errorf("-factory-key %s: not a delegated key of the trusted keys %s", path, h.cfg.TrustedKeys)
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

// SiteMaker returns the factory's Sites: NewSite, whose sites share what
// the sites of one process share (EC2's: one cache of the spot price
// history, asked once per ec2.DefaultSpotTTL, not every cycle), and log
// what their SDK says to logger.
func SiteMaker(logger *slog.Logger) func(api.FactoryEntrySpec) (glidein.Site, error) {
	reg, shared := kinds.Registry(), &glidein.Shared{}
	return func(e api.FactoryEntrySpec) (glidein.Site, error) {
		return reg.Open(context.Background(), e.Site.Kind, e.Site.Config, glidein.KindEnv{Logger: logger, Shared: shared})
	}
}

// Request is how the factory starts glidein id of entry e: the agent's
// binary as `pondctl agent -glidein ID`, joining the node's sea and
// reporting to its pool's central manager.
func (h *Host) Request(e api.FactoryEntrySpec, id string) (glidein.Request, error) {
	t := e.Template
	// An EC2 glidein's agent fetches its files from SSM into its data
	// directory (-credentials), where its arguments name them.
	dataDir := "{dir}/data"
	if k, ok := kinds.Registry().Lookup(e.Site.Kind); ok && k.FetchesFiles {
		dataDir = "{dir}"
	}
	args := []string{"agent", "-name", id, "-pool", h.cfg.Pool, "-condor-host", h.cfg.CondorHost(),
		"-join", h.cfg.GossipAddr(), "-data-dir", dataDir,
		"-glidein", id, "-lifetime", time.Duration(t.Lifetime).String()}
	files := map[string][]byte{}
	tokens, subCA := h.creds()
	if h.cfg.TLS {
		if subCA == nil {
			return glidein.Request{}, errors.New("the sea speaks TLS, and the agent has no -factory-ca to issue glideins' certificates with")
		}
		if err := h.cert(files, e, id); err != nil {
			return glidein.Request{}, err
		}
		ca, err := os.ReadFile(h.cfg.TLSCA)
		if err != nil {
			return glidein.Request{}, fmt.Errorf("-tls-ca: %w", err)
		}
		files[auth.CACertFile] = ca
		args = append(args, "-tls-cert", "{dir}/"+auth.NodeCertFile, "-tls-key", "{dir}/"+auth.NodeKeyFile,
			"-tls-ca", "{dir}/"+auth.CACertFile)
	}
	switch {
	case h.cfg.Verifier == nil:
		args = append(args, "-insecure-api")
	case tokens == nil:
		return glidein.Request{}, errors.New("the sea requires tokens, and the agent has no -factory-key to sign glideins' tokens with")
	default:
		tok, _, err := tokens.Token(e, id)
		if err != nil {
			return glidein.Request{}, err
		}
		trusted, err := os.ReadFile(h.cfg.TrustedKeys)
		if err != nil {
			return glidein.Request{}, fmt.Errorf("trusted keys: %w", err)
		}
		files[TokenFile] = []byte(tok + "\n")
		files["trusted.pem"] = trusted
		args = append(args, "-token-file", "{dir}/"+TokenFile, "-trusted-keys", "{dir}/trusted.pem",
			"-token-issuer", h.cfg.TokenIssuer)
	}
	if t.IdleTimeout > 0 {
		args = append(args, "-idle-timeout", time.Duration(t.IdleTimeout).String())
	}
	if t.MaxJobs > 0 {
		args = append(args, "-max-jobs", strconv.Itoa(t.MaxJobs))
	}
	// The glidein's startd offers what the factory matched jobs against,
	// not the whole node it lands on.
	conf := fmt.Sprintf("NUM_CPUS = %d\nMEMORY = %d\n", t.CPUs, t.MemoryMB)
	if t.Slots > 1 {
		conf += fmt.Sprintf("NUM_SLOTS = %d\n", t.Slots)
	}
	if h.cfg.Encrypt != "" {
		// The sea's gossip key, in the glidein's private configuration
		// file (0600), never on its command line.
		conf += fmt.Sprintf("%s = %s\n", knobs.Encrypt, h.cfg.Encrypt)
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
	return glidein.Request{Binary: h.cfg.Binary, Args: args, Files: files}, nil
}

// cert issues glidein id of entry e a certificate with the
// factory's delegated CA, lasting the entry's lifetime and the tokens'
// margin (within the CA's own life), into files: the certificate chain
// and a key made for it alone, both only in the request's files.
func (h *Host) cert(files map[string][]byte, e api.FactoryEntrySpec, id string) error {
	_, subCA := h.creds()
	if subCA == nil {
		return errors.New("the sea speaks TLS, and the agent has no -factory-ca to issue glideins' certificates with")
	}
	sub, err := subCA.get()
	if err != nil {
		return err
	}
	cert, key, err := sub.Issue(id, time.Duration(e.Template.Lifetime)+DefaultTokenMargin)
	if err != nil {
		return err
	}
	files[auth.NodeCertFile], files[auth.NodeKeyFile] = cert, key
	return nil
}

// Routes are the handlers of the factory's routes (api.PathFactory,
// api.PathFactoryCredentials, api.PathFactoryEntries), by the pattern the
// node serves each at.
func (h *Host) Routes() map[string]http.HandlerFunc {
	f := h.f
	return map[string]http.HandlerFunc{
		"GET " + api.PathFactory: func(w http.ResponseWriter, r *http.Request) {
			wire.WriteJSON(w, http.StatusOK, h.Status())
		},
		"PUT " + api.PathFactoryCredentials: func(w http.ResponseWriter, r *http.Request) {
			if r.TLS == nil && !h.cfg.InsecureAPI {
				wire.WriteError(w, http.StatusUpgradeRequired,
					errors.New("the factory's credentials are taken only over TLS: the agent has no -tls-cert"))
				return
			}
			var creds api.FactoryCredentials
			if err := wire.ReadJSON(r, &creds); err != nil {
				wire.WriteError(w, http.StatusBadRequest, fmt.Errorf("body: %w", err))
				return
			}
			if err := h.SetCredentials(creds); err != nil {
				wire.WriteError(w, http.StatusBadRequest, err)
				return
			}
			wire.WriteJSON(w, http.StatusOK, h.Status())
		},
		"PUT " + api.PathFactoryEntries + "{name}": func(w http.ResponseWriter, r *http.Request) {
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
		},
		"DELETE " + api.PathFactoryEntries + "{name}": func(w http.ResponseWriter, r *http.Request) {
			if err := f.RemoveEntry(r.PathValue("name")); err != nil {
				wire.WriteError(w, http.StatusInternalServerError, err)
				return
			}
			wire.WriteJSON(w, http.StatusOK, f.Status())
		},
	}
}

// Status is the factory's status with the credentials it holds.
func (h *Host) Status() api.FactoryStatus {
	st := h.f.Status()
	st.NeedsCredentials = h.cfg.Verifier != nil
	tokens, subCA := h.creds()
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

// SetCredentials checks the factory's delegated key and CA
// against the pool's glidein names (api.FactoryPrefix) and the trusted keys
// and sea's CA, keeps them in the data directory (CredentialsDir), and
// has the factory use them at once. Nothing is kept unless both are good.
func (h *Host) SetCredentials(creds api.FactoryCredentials) error {
	want := api.FactoryPrefix(h.cfg.Pool)
	if creds.Key == "" {
		return errors.New("key: missing: the factory's delegated key is required")
	}
	if creds.CA != "" && h.cfg.TLSCA == "" {
		return errors.New("ca: the agent speaks no TLS (-tls-ca): it has no use for a delegated CA")
	}
	if creds.CA == "" && h.cfg.TLSCA != "" {
		return errors.New("ca: missing: the sea speaks TLS, and the factory needs a delegated CA to certify its glideins")
	}
	dir := filepath.Join(h.cfg.DataDir, CredentialsDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return err
	}
	// Both are checked in files of their own before they replace the
	// kept ones.
	keyNew, caNew := filepath.Join(dir, CredentialsKeyFile+".new"), filepath.Join(dir, CredentialsCAFile+".new")
	defer os.Remove(keyNew)
	defer os.Remove(caNew)
	if err := os.WriteFile(keyNew, []byte(creds.Key), 0o600); err != nil {
		return err
	}
	tokens, err := h.readKey(keyNew)
	if err != nil {
		return fmt.Errorf("key: %w", err)
	}
	if got := tokens.Limits.SubjectPrefix; got != "node/"+want {
		return fmt.Errorf("key: limited to subjects %q, and the glideins of pool %s are node/%s*: credentials of another pool's factory", got, h.cfg.Pool, want)
	}
	var subCA *delegatedCA
	if creds.CA != "" {
		if err := os.WriteFile(caNew, []byte(creds.CA), 0o600); err != nil {
			return err
		}
		sub, err := (&delegatedCA{path: caNew, caFile: h.cfg.TLSCA}).load()
		if err != nil {
			return fmt.Errorf("ca: %w", err)
		}
		if sub.Prefix != want {
			return fmt.Errorf("ca: limited to names %s*, and the glideins of pool %s are %s*: credentials of another pool's factory", sub.Prefix, h.cfg.Pool, want)
		}
		if time.Now().After(sub.Cert.NotAfter) {
			return fmt.Errorf("ca: expired at %s", sub.Cert.NotAfter.UTC().Format(time.RFC3339))
		}
	}
	keyPath, caPath := filepath.Join(dir, CredentialsKeyFile), filepath.Join(dir, CredentialsCAFile)
	if err := os.Rename(keyNew, keyPath); err != nil {
		return err
	}
	if tokens, err = h.readKey(keyPath); err != nil {
		return err
	}
	if creds.CA != "" {
		if err := os.Rename(caNew, caPath); err != nil {
			return err
		}
		subCA = &delegatedCA{path: caPath, caFile: h.cfg.TLSCA}
		if _, err := subCA.get(); err != nil {
			return err
		}
	}
	h.mu.Lock()
	h.tokens, h.subCA = tokens, subCA
	h.mu.Unlock()
	h.cfg.Logger.Info("factory credentials set", "key", tokens.Key.ID(), "prefix", want)
	return nil
}

// delegatedCA is the factory's delegated CA (-factory-ca), read again when
// its file changes, so that a renewed one (pondctl cert factory) is used
// without a restart. A file that cannot be read, or whose CA the sea's CA
// did not issue, keeps the last good one.
type delegatedCA struct {
	path, caFile string

	mu    sync.Mutex
	sub   *auth.SubCA
	stamp time.Time
	size  int64
}

func (f *delegatedCA) get() (*auth.SubCA, error) {
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
func (f *delegatedCA) load() (*auth.SubCA, error) {
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
