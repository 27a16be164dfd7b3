package factory

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/overlay/api"
)

// TokenFile is the name of a glidein's token file in its directory.
const TokenFile = "node.token"

// DefaultTokenMargin is how much longer than its glidein's lifetime a
// token lasts, when its key's limits allow.
const DefaultTokenMargin = 15 * time.Minute

// Tokens makes glideins' node tokens with a delegated key (see
// auth.Authority.Delegate): subject node/ID, the key's scopes among
// DAEMON and SEA_READ, lasting the entry's lifetime and a margin, within
// the key's limits.
type Tokens struct {
	Key    *auth.SigningKey
	Limits auth.KeyLimits
	Issuer string
	// Margin is added to the entry's lifetime (DefaultTokenMargin when 0).
	Margin time.Duration
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// Token makes the token of glidein id of entry e and returns it with its
// expiry.
func (t *Tokens) Token(e api.FactoryEntrySpec, id string) (string, time.Time, error) {
	now := time.Now
	if t.Now != nil {
		now = t.Now
	}
	margin := t.Margin
	if margin <= 0 {
		margin = DefaultTokenMargin
	}
	var scopes []auth.Scope
	for _, s := range []auth.Scope{auth.Daemon, auth.SeaRead} {
		if slices.Contains(t.Limits.Scopes, s) {
			scopes = append(scopes, s)
		}
	}
	if len(scopes) == 0 {
		return "", time.Time{}, fmt.Errorf("delegated key %q grants neither DAEMON nor SEA_READ", t.Limits.Name)
	}
	life := min(time.Duration(e.Template.Lifetime)+margin, t.Limits.MaxLifetime)
	iat := now().Truncate(time.Second)
	exp := iat.Add(life)
	tok, err := auth.MintDelegated(t.Key, t.Limits, t.Issuer, auth.Claims{Subject: "node/" + id, Scopes: scopes,
		IssuedAt: iat, Expires: exp})
	if err != nil {
		return "", time.Time{}, err
	}
	return tok, exp, nil
}

// CredentialsExpiry reads a glidein's files for its credentials: the
// token (TokenFile) and the certificate (auth.NodeCertFile, the first of
// its chain), and returns when the later of them was issued and when the
// sooner expires; zero times when the files hold neither. What cannot be
// read is left out: the factory wrote the files itself.
func CredentialsExpiry(files map[string][]byte) (issued, expires time.Time) {
	take := func(iat, exp time.Time) {
		if iat.After(issued) {
			issued = iat
		}
		if !exp.IsZero() && (expires.IsZero() || exp.Before(expires)) {
			expires = exp
		}
	}
	if tok, ok := files[TokenFile]; ok {
		if c, err := auth.ReadClaims(strings.TrimSpace(string(tok))); err == nil {
			take(c.IssuedAt, c.Expires)
		}
	}
	if data, ok := files[auth.NodeCertFile]; ok {
		if b, _ := pem.Decode(data); b != nil && b.Type == "CERTIFICATE" {
			if cert, err := x509.ParseCertificate(b.Bytes); err == nil {
				take(cert.NotBefore, cert.NotAfter)
			}
		}
	}
	return issued, expires
}
