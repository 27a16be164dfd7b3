package agent

import (
	"context"
	"fmt"
	"net"
	"path/filepath"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/condor/cedar"
	"github.com/pond-htc/pond/condor/collector"
)

// cedarListener shares the API's port with CEDAR, so that HTCondor's own
// clients reach the node's collector at the agent's address
// (CONDOR_HOST = the API address): a connection whose first byte starts a
// CEDAR packet goes to the CEDAR server, every other one (TLS, HTTP) to
// the API. The methods a client may prove itself with are cedarMethods'.
func (a *Agent) cedarListener(ctx context.Context, ln net.Listener) net.Listener {
	methods, err := cedarMethods(a.cfg)
	if err != nil {
		// The key was checked when the flags were; one that went bad
		// since leaves IDTOKENS out, and says so.
		a.logger.Error("HTCondor's clients may not authenticate with tokens", "err", err)
	}
	srv := cedar.NewServer(cedar.Options{
		Methods: methods,
		Commands: collector.CedarCommands(func() *collector.Collector {
			if a.daemons == nil || a.daemons.master == nil {
				return nil
			}
			return a.daemons.master.Collector()
		}),
		Logger: a.logger.With("component", "cedar"),
	})
	return cedar.Split(ctx, ln, srv, cedar.SplitOptions{Logger: a.logger.With("component", "cedar")})
}

// cedarMethods are the methods HTCondor's clients may authenticate with:
// IDTOKENS, with -htcondor-key, checked against that key, the trust domain
// -token-issuer and the authority's revocations (the revoked file next to
// -trusted-keys), a token's scopes granting what they grant on the API;
// and FS (same host), any local user so proven may read, as the READ
// scope allows on the API. With a key that cannot be read, FS alone and
// the error.
func cedarMethods(cfg *Config) ([]cedar.Method, error) {
	fs := &cedar.FS{Domain: cfg.Name, Grant: func(_ uint32, user string) *auth.Claims {
		return &auth.Claims{Subject: user + "@" + cfg.Name, Scopes: []auth.Scope{auth.Read}}
	}}
	if cfg.HTCondorKey == "" {
		return []cedar.Method{fs}, nil
	}
	k, err := auth.ReadHTCondorKey(cfg.HTCondorKey, auth.HTCondorPoolKey)
	if err != nil {
		return []cedar.Method{fs}, fmt.Errorf("-htcondor-key: %w", err)
	}
	v := &auth.HTCondorVerifier{Issuer: cfg.TokenIssuer, Keys: map[string]*auth.HTCondorKey{k.ID(): k}, Leeway: tokenLeeway}
	if cfg.TrustedKeys != "" {
		v.Revoked = auth.Revocations(filepath.Join(filepath.Dir(cfg.TrustedKeys), auth.RevokedFile))
	}
	return []cedar.Method{&cedar.IDTokens{Verifier: v}, fs}, nil
}
