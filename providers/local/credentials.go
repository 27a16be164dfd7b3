package local

import (
	"context"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/pond-htc/pond/condor/auth"

	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/tokenwatch"
	"github.com/pond-htc/pond/providers"
)

// NodeTokenFile is the name of a node's token inside its data directory
// (mode 0600): what the agent presents, with -token-file, to other agents
// and its daemons to other daemons.
const NodeTokenFile = "node.token"

// DefaultNodeTokenLifetime is how long a node's token lasts unless the
// provider block's node_token_lifetime says otherwise.
const DefaultNodeTokenLifetime = 30 * 24 * time.Hour

// authority opens the sea's authority (auth.FindAuthorityDir: the working
// directory's .pond/auth unless POND_AUTHORITY names another), making it
// the first time.
func (p *Provider) authority() (*auth.Authority, error) {
	p.authMu.Lock()
	defer p.authMu.Unlock()
	if p.auth != nil {
		return p.auth, nil
	}
	a, err := providers.OpenAuthority(p.workDir)
	if err != nil {
		return nil, err
	}
	p.auth = a
	return a, nil
}

// nodeScopes are the scopes of a node's token: DAEMON, for what its
// daemons do in their pool, and SEA_READ.
func nodeScopes() []auth.Scope { return []auth.Scope{auth.Daemon, auth.SeaRead} }

// invites reports whether the node sends pond invitations, and so needs a
// pond grant bound to its own API address: a central manager, or a node
// that runs a pond policy.
func invites(role string, sp spec) bool { return role == api.RoleCM || len(sp.Policy) > 0 }

// nodeCredentials issues the token of the node named name (subject
// "node/NAME"), writes it in dir (mode 0600) and returns the agent's
// arguments that give it its credentials: the authority's trusted keys and
// issuer, whose tokens its API and daemons accept, its token file, and the
// authority's pool signing key of HTCondor-format tokens, with which its
// CEDAR listener checks the IDTOKENS of HTCondor's clients (every agent
// serves them, on its API's port; they run on this host as the user whose
// authority it is, who can read the key anyway).
// Every launch issues a new token; the authority records it, so that
// `pondctl token list` shows it and `pondctl token revoke` revokes it.
//
// The first token of a node that invites lasts only until grantNode
// replaces it: interimLifetime.
func (p *Provider) nodeCredentials(dir, name string, inviter bool) ([]string, error) {
	a, err := p.authority()
	if err != nil {
		return nil, err
	}
	life := p.tokenLife
	if inviter {
		life = min(life, interimLifetime)
	}
	tok, _, err := a.Issue("node/"+name, nodeScopes(), life)
	if err != nil {
		return nil, fmt.Errorf("issuing the node's token: %w", err)
	}
	path := filepath.Join(dir, NodeTokenFile)
	if err := writePrivate(path, tok+"\n"); err != nil {
		return nil, err
	}
	return []string{
		"-trusted-keys", filepath.Join(a.Dir(), auth.TrustedKeysFile),
		"-token-issuer", a.Issuer(),
		"-token-file", path,
		"-htcondor-key", a.HTCondorKeyFile(),
	}, nil
}

// interimLifetime bounds the life of the token a node that invites starts
// with, before it has its pond grant.
const interimLifetime = 15 * time.Minute

// grantNode replaces the token of a node that sends invitations, once its
// API address is known, with one that is also a pond grant bound to that
// address and grants SEA_WRITE: the node may then invite nodes into its
// ponds and release them, and only under itself as central manager. The
// agent reads its token file again when it changes.
func (p *Provider) grantNode(dir, name, apiAddr string) error {
	a, err := p.authority()
	if err != nil {
		return err
	}
	tok, _, err := a.IssueGrant("node/"+name, append(nodeScopes(), auth.SeaWrite), apiAddr, p.tokenLife)
	if err != nil {
		return fmt.Errorf("issuing the node's pond grant: %w", err)
	}
	return writePrivate(filepath.Join(dir, NodeTokenFile), tok+"\n")
}

// keepGrant gives a live node that invites its pond grant if it lacks
// one: a pondctl killed between the node's start and grantNode left it
// with its interim token, which expires within interimLifetime.
func (p *Provider) keepGrant(e *entry, sp spec) error {
	if !invites(e.Role, sp) || e.API == "" {
		return nil
	}
	data, err := os.ReadFile(filepath.Join(e.DataDir, NodeTokenFile))
	if err == nil {
		if c, err := auth.ReadClaims(strings.TrimSpace(string(data))); err == nil && c.CentralManager == e.API {
			return nil
		}
	}
	return p.grantNode(e.DataDir, e.Node, e.API)
}

// tokenRenewWithin is how long before its token expires a live node is
// given a new one by an apply: the longest of the agents' default alarm
// thresholds (tokenwatch.DefaultThresholds), so that an apply silences
// them; a token whose whole life is shorter is renewed at a third of its
// life left.
var tokenRenewWithin = tokenwatch.DefaultThresholds[0]

// tokenDue reports whether the token of the node whose data directory is
// dir is due for renewal at now (tokenRenewWithin), with its claims; a
// token that cannot be read is due.
func tokenDue(dir string, now time.Time) (bool, *auth.Claims) {
	data, err := os.ReadFile(filepath.Join(dir, NodeTokenFile))
	if err != nil {
		return false, nil // a node without a token (a sea without tokens)
	}
	c, err := auth.ReadClaims(strings.TrimSpace(string(data)))
	if err != nil {
		return true, nil
	}
	if c.Expires.IsZero() {
		return false, c
	}
	within := min(tokenRenewWithin, c.Expires.Sub(c.IssuedAt)/3)
	return c.Expires.Sub(now) <= within, c
}

// renewToken writes a new token over the token file of a live node whose
// token is due (tokenDue), as its launch would issue it (its pond grant
// for a node that invites); the agent reads the file again, with no
// restart. It reports whether it did.
func (p *Provider) renewToken(e *entry, sp spec) (bool, error) {
	due, _ := tokenDue(e.DataDir, p.now())
	if !due {
		return false, nil
	}
	if invites(e.Role, sp) && e.API != "" {
		return true, p.grantNode(e.DataDir, e.Node, e.API)
	}
	a, err := p.authority()
	if err != nil {
		return false, err
	}
	tok, _, err := a.Issue("node/"+e.Node, nodeScopes(), p.tokenLife)
	if err != nil {
		return false, fmt.Errorf("renewing the token of node %s: %w", e.Node, err)
	}
	return true, writePrivate(filepath.Join(e.DataDir, NodeTokenFile), tok+"\n")
}

// tokensDue reports whether a live node of es holds a token due for
// renewal: the plan then shows the pool updated, and the apply renews it.
func tokensDue(es []*entry, now time.Time) bool {
	for _, e := range es {
		if due, _ := tokenDue(e.DataDir, now); due && e.alive() {
			return true
		}
	}
	return false
}

// credentialWarnings warns of the nodes of pool whose agents say (their
// sea tag api.TagCredExpiry) that one of their credentials is within an
// alarm's threshold of its expiry: which credential, which node, the time
// left, and how it is renewed.
func (p *Provider) credentialWarnings(ctx context.Context, address, pool string, present []*entry) hcl.Diagnostics {
	if len(present) == 0 {
		return nil
	}
	ours := map[string]*entry{}
	for _, e := range present {
		ours[e.Node] = e
	}
	cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	ms, err := p.client(present[0].API).Members(cctx, api.MembersFilter{Status: api.StatusAlive})
	if err != nil {
		return nil // the plan's other reads say the sea cannot be reached
	}
	slices.SortFunc(ms, func(a, b api.Member) int { return strings.Compare(a.Name, b.Name) })
	var diags hcl.Diagnostics
	now := time.Now()
	for _, m := range ms {
		v := m.Tags[api.TagCredExpiry]
		if ours[m.Name] == nil || v == "" {
			continue
		}
		cred, exp, err := tokenwatch.ParseTag(v)
		if err != nil {
			continue
		}
		left := "expired"
		if d := exp.Sub(now); d > 0 {
			left = "expires in " + d.Round(time.Second).String()
		}
		how := "apply renews it."
		switch cred {
		case tokenwatch.CredToken:
			how = "apply writes a new token over the node's token file; the agent reads it again, with no restart."
		case tokenwatch.CredFactoryCA:
			how = "apply gives the pilot factory a new delegated CA (the working directory's authority makes it); glideins already running keep their certificates until their own expiry."
		case tokenwatch.CredCert:
			how = "apply -replace=" + address + " starts the pool's nodes again with new certificates."
		}
		diags = append(diags, providers.Warning(
			fmt.Sprintf("The %s of node %s of pool %s %s", cred, m.Name, pool, left),
			fmt.Sprintf("Pool %s (%s): the %s of node %s expires at %s (%s). %s",
				pool, address, cred, m.Name, exp.UTC().Format(time.RFC3339), left, how)))
	}
	return diags
}

// writePrivate replaces the file at path with data, mode 0600, at once.
func writePrivate(path, data string) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(data), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// clientLifetime is how long the token the provider presents to its
// agents lasts; it is made again when less than a minute is left.
const clientLifetime = 15 * time.Minute

// client returns a client of the agent API at addr presenting the
// provider's own token: one the working directory's authority makes for
// the user running pondctl, administering the sea and its pools, as
// auth.FindToken's. It presents none if the authority cannot be opened
// (the call then fails with 401, which says why).
func (p *Provider) client(addr string) *api.Client {
	c := api.NewClient(addr).WithTLS(p.clientTLS())
	tok, err := p.clientToken()
	if err != nil {
		p.logger.Warn("no token for the agents", "err", err)
		return c
	}
	return c.WithToken(tok)
}

func (p *Provider) clientToken() (string, error) {
	a, err := p.authority()
	if err != nil {
		return "", err
	}
	p.authMu.Lock()
	defer p.authMu.Unlock()
	if p.tok != "" && time.Until(p.tokExpires) > time.Minute {
		return p.tok, nil
	}
	subject := "pondctl"
	if u, err := user.Current(); err == nil && u.Username != "" {
		subject = u.Username
	}
	tok, err := a.Mint(subject, []auth.Scope{auth.SeaAdmin, auth.Administrator}, clientLifetime)
	if err != nil {
		return "", err
	}
	p.tok, p.tokExpires = tok, time.Now().Add(clientLifetime)
	return tok, nil
}
