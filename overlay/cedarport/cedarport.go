// Package cedarport shares a node's API port with CEDAR, HTCondor's own
// protocol, so that HTCondor's clients reach the node's collector and
// schedd at the node's address: it says which methods a client may
// authenticate with, and what each proves.
package cedarport

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/condor/cedar"
	"github.com/pond-htc/pond/condor/collector"
	"github.com/pond-htc/pond/condor/daemon"
	"github.com/pond-htc/pond/condor/schedd"
)

// fsScopes is what a local user FS proves may do, for an agent running
// as agentUID. Root, HTCondor's queue super user, may manage anyone's jobs
// (ADMINISTRATOR). Another user may read, and manage its own jobs (WRITE)
// where they run and move files with its own rights or the agent's own:
// when the agent runs as root, or as that user. An agent that is not root
// runs every job as itself, so a third user gets READ only: its jobs would
// run with the agent's user's rights.
func fsScopes(agentUID, uid uint32) []auth.Scope {
	switch {
	case uid == 0:
		return []auth.Scope{auth.Read, auth.Write, auth.Administrator}
	case agentUID == 0 || uid == agentUID:
		return []auth.Scope{auth.Read, auth.Write}
	}
	return []auth.Scope{auth.Read}
}

// Config says how a node's CEDAR clients authenticate.
type Config struct {
	// Name is the node's name: the FS domain, and the identity its
	// collector answers with.
	Name string
	// HTCondorKey is the pool key IDTOKENS are checked against
	// (-htcondor-key, "" for none), TokenIssuer their trust domain
	// (-token-issuer), and TrustedKeys the trusted keys file, beside
	// which the authority keeps its revocations.
	HTCondorKey, TokenIssuer, TrustedKeys string
	// TLSCert, TLSKey and TLSCA are the node's certificate, its key and
	// the sea's CA, for SSL ("" for none).
	TLSCert, TLSKey, TLSCA string
	// Leeway is the clock skew tolerated on a token's times.
	Leeway time.Duration
}

// commands are the CEDAR commands of the node's collector and schedd,
// each following the daemon master (nil before the daemons start) runs
// now.
func commands(name string, address func() string, master func() *daemon.Master) map[int]cedar.Command {
	cmds := collector.CedarCommands(collector.CedarOptions{
		Current: func() *collector.Collector {
			if m := master(); m != nil {
				return m.Collector()
			}
			return nil
		},
		Name:    name,
		Address: address,
	})
	for n, c := range schedd.CedarCommands(func() *schedd.Schedd {
		if m := master(); m != nil {
			return m.Schedd()
		}
		return nil
	}) {
		cmds[n] = c
	}
	return cmds
}

// Listener shares the API's port ln with CEDAR, so that HTCondor's own
// clients reach the node's collector at the node's address (CONDOR_HOST =
// the API address, address): a connection whose first byte starts a CEDAR
// packet goes to the CEDAR server, every other one (TLS, HTTP) to the API,
// through the listener returned. The methods a client may prove itself
// with are Methods'; master is the node's daemons' master (nil before
// they start).
func Listener(ctx context.Context, ln net.Listener, c Config, address func() string, master func() *daemon.Master, logger *slog.Logger) net.Listener {
	methods, err := Methods(c)
	if err != nil {
		// The key was checked when the flags were; one that went bad
		// since leaves its method out, and says so.
		logger.Error("HTCondor's clients may not use every method", "err", err)
	}
	srv := cedar.NewServer(cedar.Options{
		Methods:  methods,
		Commands: commands(c.Name, address, master),
		Logger:   logger.With("component", "cedar"),
	})
	return cedar.Split(ctx, ln, srv, cedar.SplitOptions{Logger: logger.With("component", "cedar")})
}

// Methods are the methods HTCondor's clients may authenticate with,
// in this order of preference:
//   - IDTOKENS, with -htcondor-key, checked against that key, the trust
//     domain -token-issuer and the authority's revocations (the revoked
//     file next to -trusted-keys), a token's scopes granting what they
//     grant on the API;
//   - SSL, with the node's certificate (-tls-cert, -tls-key, -tls-ca): a
//     client certificate of the sea's CA, which proves a member of the
//     sea, its common name the identity, granted READ;
//   - FS (same host): any local user so proven may read, as the READ
//     scope allows on the API.
//
// A key or certificate that cannot be read leaves its method out, and
// the error says why.
func Methods(cfg Config) ([]cedar.Method, error) {
	var methods []cedar.Method
	var errs []error
	if cfg.HTCondorKey != "" {
		k, err := auth.ReadHTCondorKey(cfg.HTCondorKey, auth.HTCondorPoolKey)
		if err != nil {
			errs = append(errs, fmt.Errorf("-htcondor-key: %w", err))
		} else {
			v := &auth.HTCondorVerifier{Issuer: cfg.TokenIssuer, Keys: map[string]*auth.HTCondorKey{k.ID(): k}, Leeway: cfg.Leeway}
			if cfg.TrustedKeys != "" {
				v.Revoked = auth.Revocations(filepath.Join(filepath.Dir(cfg.TrustedKeys), auth.RevokedFile))
			}
			methods = append(methods, &cedar.IDTokens{Verifier: v})
		}
	}
	if cfg.TLSCert != "" {
		tc, err := auth.ServerTLS(cfg.TLSCert, cfg.TLSKey, cfg.TLSCA)
		if err != nil {
			errs = append(errs, fmt.Errorf("SSL with -tls-cert: %w", err))
		} else {
			methods = append(methods, &cedar.SSL{
				Config: func() (*tls.Config, error) { return tc, nil },
				Grant: func(c *x509.Certificate) *auth.Claims {
					return &auth.Claims{Subject: c.Subject.CommonName, Scopes: []auth.Scope{auth.Read}}
				},
			})
		}
	}
	methods = append(methods, &cedar.FS{Domain: cfg.Name, Grant: func(uid uint32, user string) *auth.Claims {
		return &auth.Claims{Subject: user + "@" + cfg.Name, Scopes: fsScopes(uint32(os.Geteuid()), uid)}
	}})
	return methods, errors.Join(errs...)
}
