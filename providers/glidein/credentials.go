package glidein

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/overlay/api"
	site "github.com/pond-htc/pond/overlay/glidein"
	"github.com/pond-htc/pond/overlay/knobs"
	"github.com/pond-htc/pond/providers"
)

// The files of a glidein's directory on the far side, which Request.Files
// carries there (mode 0600) and the agent's arguments name as {dir}/NAME.
const (
	// TokenFile is the glidein's token, for subject node/ID.
	TokenFile = "node.token"
	// ConfigFile is the agent's configuration file: its slots and the
	// sea's gossip key.
	ConfigFile = "condor_config"
	// ValidateFile holds the validate block's checks, the JSON list of
	// overlay/api.ValidationCheck the agent's glidein runtime reads.
	ValidateFile = "validate.json"
	// StatusFile is where the glidein writes its status
	// (overlay/glidein.ReadStatus reads it).
	StatusFile = site.StatusFile
)

// credentialLifetime is how long the token and certificate of a glidein
// of lifetime last: the provider's credential_lifetime, or the lifetime
// plus credentialMargin.
func (p *Provider) credentialLifetime(lifetime time.Duration) time.Duration {
	if p.credLife > 0 {
		return p.credLife
	}
	return lifetime + credentialMargin
}

// request builds the Request that starts glidein id of spec sp in pool:
// its credentials, issued now (a token for node/ID with DAEMON and
// SEA_READ, a certificate of the sea's CA), travel in Files, never on the
// command line.
func (p *Provider) request(id string, sp spec, pool poolInfo) (site.Request, error) {
	a, err := p.authority()
	if err != nil {
		return site.Request{}, err
	}
	life := p.credentialLifetime(sp.Lifetime)
	tok, _, err := a.Issue("node/"+id, []auth.Scope{auth.Daemon, auth.SeaRead}, life)
	if err != nil {
		return site.Request{}, fmt.Errorf("issuing the token of %s: %w", id, err)
	}
	hosts := []string{"localhost", "127.0.0.1", "::1"}
	if ip := net.ParseIP(pool.bind); ip != nil && !ip.IsUnspecified() && !ip.IsLoopback() {
		hosts = append(hosts, pool.bind)
	}
	certPEM, keyPEM, err := a.IssueCertificate(id, hosts, life)
	if err != nil {
		return site.Request{}, fmt.Errorf("the certificate of %s: %w", id, err)
	}
	caPEM, err := os.ReadFile(a.CAFile())
	if err != nil {
		return site.Request{}, fmt.Errorf("the sea's CA: %w", err)
	}
	trusted, err := os.ReadFile(filepath.Join(a.Dir(), auth.TrustedKeysFile))
	if err != nil {
		return site.Request{}, fmt.Errorf("the authority's trusted keys: %w", err)
	}
	var cfg bytes.Buffer
	fmt.Fprintf(&cfg, "# Written by pond's %s provider for glidein %s.\n", p.kind, id)
	fmt.Fprintf(&cfg, "NUM_SLOTS = %d\n", sp.Slots)
	// Its startd offers what the glidein was given, divided among its
	// slots, not the whole machine it lands on.
	fmt.Fprintf(&cfg, "NUM_CPUS = %d\n", max(sp.CPUs, 1))
	if sp.MemoryMB > 0 {
		fmt.Fprintf(&cfg, "MEMORY = %d\n", sp.MemoryMB)
	}
	if pool.key != "" {
		fmt.Fprintf(&cfg, "%s = %s\n", knobs.Encrypt, pool.key)
	}
	files := map[string][]byte{
		TokenFile:            []byte(tok + "\n"),
		auth.NodeCertFile:    certPEM,
		auth.NodeKeyFile:     keyPEM,
		auth.CACertFile:      caPEM,
		auth.TrustedKeysFile: trusted,
		ConfigFile:           cfg.Bytes(),
	}
	in := func(name string) string { return "{dir}/" + name }
	bind := net.JoinHostPort(pool.bind, "0")
	args := providers.AgentArgs{
		Config:        in(ConfigFile),
		Name:          id,
		Bind:          bind,
		API:           bind,
		DataDir:       "{dir}",
		GossipProfile: p.profile,
		Role:          api.RoleNode,
		Pool:          pool.name,
		CondorHost:    pool.reach,
		Join:          []string{pool.join},
		Attrs:         sp.Attrs,
		TrustedKeys:   in(auth.TrustedKeysFile),
		TokenIssuer:   a.Issuer(),
		TokenFile:     in(TokenFile),
		TLSCert:       in(auth.NodeCertFile),
		TLSKey:        in(auth.NodeKeyFile),
		TLSCA:         in(auth.CACertFile),
	}.Args()
	// The glidein runtime's flags. Its end is its lifetime from its
	// start; a batch system that ends it sooner says so in its
	// environment (site.EndEnv), which the agent reads.
	args = append(args,
		"-glidein", id,
		"-lifetime", sp.Lifetime.String(),
		"-idle-timeout", sp.IdleTimeout.String(),
		"-cm-timeout", sp.CMTimeout.String(),
		"-status-file", in(StatusFile),
	)
	if sp.MaxJobs > 0 {
		args = append(args, "-max-jobs", strconv.Itoa(sp.MaxJobs))
	}
	if sp.Validate != nil {
		data, err := json.MarshalIndent(sp.Validate.checks(), "", "  ")
		if err != nil {
			return site.Request{}, err
		}
		files[ValidateFile] = data
		args = append(args, "-validate", in(ValidateFile))
	}
	return site.Request{
		ID:       id,
		Binary:   p.bin,
		Args:     args,
		Files:    files,
		Lifetime: sp.Lifetime + drainMargin,
		CPUs:     sp.CPUs,
		MemoryMB: sp.MemoryMB,
	}, nil
}

// credentialWarning returns why a glidein of lifetime would outlive its
// credential, or "": credential_lifetime is shorter, or the sea's CA
// expires first (a certificate never outlives its CA).
func (p *Provider) credentialWarning(lifetime time.Duration) string {
	if p.credLife > 0 && p.credLife < lifetime {
		return fmt.Sprintf("The glideins' token and certificate last %s (credential_lifetime of the %s provider), less than their lifetime of %s: a glidein leaves when its credential expires, before its lifetime ends. Raise credential_lifetime or lower lifetime.",
			p.credLife, p.kind, lifetime)
	}
	if p.workDir == "" {
		return ""
	}
	certs, err := auth.ReadCertificates(auth.FindCA(os.Getenv, p.workDir))
	if err != nil || len(certs) == 0 {
		return ""
	}
	end := certs[0].NotAfter
	for _, c := range certs[1:] {
		if c.NotAfter.After(end) {
			end = c.NotAfter
		}
	}
	if until := time.Until(end); until < lifetime {
		return fmt.Sprintf("The sea's CA expires at %s, in %s, before a glidein started now would reach its lifetime of %s: its certificate cannot outlive the CA, and it leaves then.",
			end.UTC().Format(time.RFC3339), until.Round(time.Minute), lifetime)
	}
	return ""
}
