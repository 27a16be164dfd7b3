package auth

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Claims are what a token says: who it was issued to, by whom, what it
// grants and until when.
type Claims struct {
	// Issuer names the pool or sea whose key signed the token ("iss").
	Issuer string
	// Subject is the identity the token authenticates ("sub"), for example
	// "alice" or "node:campus-3".
	Subject string
	// Scopes are the authorization levels the token grants ("scope").
	Scopes []Scope
	// ID identifies the token, so that it can be revoked ("jti"); Mint
	// makes one when it is empty.
	ID string
	// IssuedAt and Expires bound the token's life ("iat", "exp"). Every
	// token expires.
	IssuedAt time.Time
	Expires  time.Time
	// CentralManager, when set, binds the token's invitations to one
	// central manager ("pond_cm"): a pond grant. A node invited with it
	// joins only a pond whose central manager is this API address.
	CentralManager string
	// PondID, when set, binds the token's invitations and releases to one
	// pond ("pond_id").
	PondID string
}

// Allows reports whether the claims grant need, directly or through a
// scope that implies it.
func (c *Claims) Allows(need Scope) bool {
	return slices.ContainsFunc(c.Scopes, func(s Scope) bool { return s.grants(need) })
}

// jwtClaims is a token's payload as IDTOKENS lays it out: the registered
// claims and a space-separated "scope".
type jwtClaims struct {
	jwt.RegisteredClaims
	Scope          string `json:"scope"`
	CentralManager string `json:"pond_cm,omitempty"`
	PondID         string `json:"pond_id,omitempty"`
}

// Mint signs c with k and returns the token. c must name its issuer and
// subject, grant at least one scope and expire.
func Mint(k *SigningKey, c Claims) (string, error) {
	if err := c.complete(); err != nil {
		return "", err
	}
	scopes := c.scopeNames()
	t := jwt.NewWithClaims(jwt.SigningMethodEdDSA, jwtClaims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer:    c.Issuer,
			Subject:   c.Subject,
			ID:        c.ID,
			IssuedAt:  jwt.NewNumericDate(c.IssuedAt),
			ExpiresAt: jwt.NewNumericDate(c.Expires),
		},
		Scope:          strings.Join(scopes, " "),
		CentralManager: c.CentralManager,
		PondID:         c.PondID,
	})
	t.Header["kid"] = k.ID()
	return t.SignedString(k.priv)
}

// Errors of Verify. Each is wrapped with the detail.
var (
	// ErrNoToken is a request that carries no token.
	ErrNoToken = errors.New("no token")
	// ErrInvalid is a token that is malformed, not signed by a trusted
	// key, of another issuer, or not valid yet.
	ErrInvalid = errors.New("invalid token")
	// ErrExpired is a token past its expiry.
	ErrExpired = errors.New("token expired")
	// ErrRevoked is a token whose ID was revoked.
	ErrRevoked = errors.New("token revoked")
)

// Verifier checks tokens.
type Verifier struct {
	// Issuer is the only issuer accepted.
	Issuer string
	// Keys are the public keys trusted to sign tokens: more than one while
	// a signing key is being replaced.
	Keys []ed25519.PublicKey
	// Delegated are keys trusted only within their limits (see
	// DelegatedKey): a token one signed that goes beyond them is invalid.
	Delegated []DelegatedKey
	// MoreDelegated, when set, gives delegated keys trusted besides
	// Delegated, asked at each verification: WatchDelegated reads them
	// from a trusted keys file again when it changes, so that a key
	// delegated after the verifier was made is trusted without a restart.
	// With fresh false it may give the keys it gave a moment ago; a key
	// not among them is looked for again with fresh true, which gives
	// the keys as their source has them now.
	MoreDelegated func(fresh bool) []DelegatedKey
	// Revoked, when set, reports whether a token ID was revoked.
	Revoked func(id string) bool
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// Leeway is the clock skew tolerated on expiry and issue times.
	Leeway time.Duration

	// verified are the tokens whose signatures were checked (see Verify).
	verified verifiedTokens
}

// Verify checks a token's signature, issuer and times and returns its
// claims.
//
// A token whose signature was checked is remembered by its SHA-256 until
// it expires (at most verifiedMax tokens), so that the same token
// presented again is not parsed and its signature not checked again:
// everything else is checked again at each call, its issuer, its times
// against the clock, that the key that signed it is still trusted (and
// within its limits, for a delegated key) and that it is not revoked. A
// token that fails any of them is forgotten and verified in full.
func (v *Verifier) Verify(token string) (*Claims, error) {
	if token == "" {
		return nil, ErrNoToken
	}
	now := time.Now
	if v.Now != nil {
		now = v.Now
	}
	sum := sha256.Sum256([]byte(token))
	if c := v.remembered(sum, now()); c != nil {
		if v.Revoked != nil && v.Revoked(c.ID) {
			v.forget(sum)
			return nil, fmt.Errorf("%w: %s", ErrRevoked, c.ID)
		}
		return c, nil
	}
	var jc jwtClaims
	// The key the signature is checked with, remembered with the token.
	var signer ed25519.PublicKey
	keyOf := func(t *jwt.Token) (any, error) {
		k, err := v.key(t)
		if err == nil {
			signer = k
		}
		return k, err
	}
	t, err := jwt.ParseWithClaims(token, &jc, keyOf,
		jwt.WithValidMethods([]string{jwt.SigningMethodEdDSA.Alg()}),
		jwt.WithIssuer(v.Issuer),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithLeeway(v.Leeway),
		jwt.WithTimeFunc(now))
	switch {
	case errors.Is(err, jwt.ErrTokenExpired):
		return nil, fmt.Errorf("%w: %v", ErrExpired, err)
	case err != nil:
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if jc.Subject == "" || jc.ID == "" {
		return nil, fmt.Errorf("%w: no subject or no token ID", ErrInvalid)
	}
	if v.Revoked != nil && v.Revoked(jc.ID) {
		return nil, fmt.Errorf("%w: %s", ErrRevoked, jc.ID)
	}
	c := &Claims{Issuer: jc.Issuer, Subject: jc.Subject, ID: jc.ID, IssuedAt: jc.IssuedAt.Time, Expires: jc.ExpiresAt.Time,
		CentralManager: jc.CentralManager, PondID: jc.PondID}
	for _, s := range strings.Fields(jc.Scope) {
		// Scopes this version does not know grant nothing.
		if sc, err := ParseScope(s); err == nil {
			c.Scopes = append(c.Scopes, sc)
		}
	}
	kid, _ := t.Header["kid"].(string)
	if err := v.withinLimits(kid, c, jc.Scope); err != nil {
		return nil, err
	}
	var nbf time.Time
	if jc.NotBefore != nil {
		nbf = jc.NotBefore.Time
	}
	v.remember(sum, &verifiedToken{claims: *c, kid: kid, key: signer, scope: jc.Scope, notBefore: nbf})
	return c.clone(), nil
}

// withinLimits reports why c, whose "scope" claim is scope, is beyond the
// limits of the delegated key kid names, or nil (nil too when kid names no
// delegated key).
func (v *Verifier) withinLimits(kid string, c *Claims, scope string) error {
	d := v.delegated(kid)
	if d == nil {
		return nil
	}
	// Every scope the token names counts, known or not.
	all := *c
	all.Scopes = nil
	for _, s := range strings.Fields(scope) {
		all.Scopes = append(all.Scopes, Scope(s))
	}
	if err := d.Limits.allows(&all); err != nil {
		return fmt.Errorf("%w: signed by delegated key %q: %v", ErrInvalid, d.Limits.Name, err)
	}
	return nil
}

// clone is a copy of c that shares nothing with it.
func (c *Claims) clone() *Claims {
	cp := *c
	cp.Scopes = slices.Clone(c.Scopes)
	return &cp
}

// delegated returns the delegated key whose ID is kid, or nil. A kid of
// one of Keys (most tokens: every request's is checked against the
// delegated keys' limits) is not looked for further.
func (v *Verifier) delegated(kid string) *DelegatedKey {
	if d := findDelegated(v.Delegated, kid); d != nil {
		return d
	}
	if v.MoreDelegated == nil || v.signingKey(kid) != nil {
		return nil
	}
	if d := findDelegated(v.MoreDelegated(false), kid); d != nil {
		return d
	}
	return findDelegated(v.MoreDelegated(true), kid)
}

// signingKey is the key of Keys whose ID is kid, or nil.
func (v *Verifier) signingKey(kid string) ed25519.PublicKey {
	for _, k := range v.Keys {
		if keyID(k) == kid {
			return k
		}
	}
	return nil
}

// findDelegated returns the key of keys whose ID is kid, or nil.
func findDelegated(keys []DelegatedKey, kid string) *DelegatedKey {
	for _, d := range keys {
		if keyID(d.Key) == kid {
			return &d
		}
	}
	return nil
}

// AllDelegated returns the delegated keys v trusts: Delegated and those
// MoreDelegated gives.
func (v *Verifier) AllDelegated() []DelegatedKey {
	if v.MoreDelegated == nil {
		return v.Delegated
	}
	return append(append([]DelegatedKey(nil), v.Delegated...), v.MoreDelegated(false)...)
}

// key finds the trusted key a token names in its "kid" header.
func (v *Verifier) key(t *jwt.Token) (ed25519.PublicKey, error) {
	kid, _ := t.Header["kid"].(string)
	if k := v.trusted(kid); k != nil {
		return k, nil
	}
	return nil, fmt.Errorf("signed with key %q, which is not trusted", kid)
}

// trusted is the key, trusted or delegated, whose ID is kid, or nil.
func (v *Verifier) trusted(kid string) ed25519.PublicKey {
	if k := v.signingKey(kid); k != nil {
		return k
	}
	if d := v.delegated(kid); d != nil {
		return d.Key
	}
	return nil
}

// complete checks that c names its issuer and subject, grants a scope and
// expires, and fills in a random ID and the time of issue when c has none.
func (c *Claims) complete() error {
	switch {
	case c.Issuer == "":
		return errors.New("a token needs an issuer")
	case c.Subject == "":
		return errors.New("a token needs a subject")
	case len(c.Scopes) == 0:
		return errors.New("a token needs a scope")
	case c.Expires.IsZero():
		return errors.New("a token needs an expiry")
	}
	if c.ID == "" {
		var b [16]byte
		if _, err := rand.Read(b[:]); err != nil {
			return err
		}
		c.ID = hex.EncodeToString(b[:])
	}
	if c.IssuedAt.IsZero() {
		c.IssuedAt = time.Now()
	}
	return nil
}

// scopeNames is c's scopes as the "scope" claim lists them.
func (c *Claims) scopeNames() []string {
	names := make([]string, len(c.Scopes))
	for i, s := range c.Scopes {
		names[i] = string(s)
	}
	return names
}
