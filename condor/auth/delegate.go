package auth

import (
	"crypto/ed25519"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// A delegated key is a signing key the authority hands to a program that
// must make tokens without holding the authority's own key, such as the
// pilot factory of a central manager, which gives each glidein it starts a
// node token. Verifiers trust it only within the limits written next to it
// in the trusted keys: a token it signed whose subject, scopes or lifetime
// go beyond them is refused, so that whoever steals the delegated key
// (from the central manager's disk) can mint glidein tokens and nothing
// more: no administrator, no pondctl, no pond grant.
//
// The trusted keys file holds a delegated key as a PEM block of its own
// type (delegatedBlock) with the limits as headers. ReadPublicKeys refuses
// a file with such a block, so a reader that does not know the limits
// fails closed instead of trusting the key fully.

// delegatedBlock is the PEM type of a delegated public key.
const delegatedBlock = "POND DELEGATED PUBLIC KEY"

// KeyLimits bound what a token signed by a delegated key may claim.
type KeyLimits struct {
	// Name says what the key is for ("factory campus").
	Name string
	// SubjectPrefix starts every subject it may sign, such as
	// "node/pond-campus-"; required.
	SubjectPrefix string
	// Scopes are the most a token may grant: each of its scopes must be
	// one of them.
	Scopes []Scope
	// MaxLifetime bounds a token's expiry less its issue time.
	MaxLifetime time.Duration
}

// DelegatedKey is a delegated public key and its limits.
type DelegatedKey struct {
	Key    ed25519.PublicKey
	Limits KeyLimits
}

// check reports what in l is unsafe or missing.
func (l KeyLimits) check() error {
	if !strings.HasPrefix(l.SubjectPrefix, "node/") || len(l.SubjectPrefix) <= len("node/") {
		return fmt.Errorf("subject prefix %q: want node/ and more", l.SubjectPrefix)
	}
	if len(l.Scopes) == 0 {
		return errors.New("no scopes")
	}
	for _, s := range l.Scopes {
		if !slices.Contains([]Scope{Daemon, SeaRead, Read, AdvertiseStartd, AdvertiseMaster}, s) {
			return fmt.Errorf("scope %s may not be delegated", s)
		}
	}
	if l.MaxLifetime <= 0 {
		return errors.New("no maximum lifetime")
	}
	if strings.ContainsAny(l.Name+l.SubjectPrefix, "\r\n:") {
		return errors.New("name and subject prefix may not hold a newline or ':'")
	}
	return nil
}

// allows reports why c is beyond the limits, or nil.
func (l KeyLimits) allows(c *Claims) error {
	if !strings.HasPrefix(c.Subject, l.SubjectPrefix) {
		return fmt.Errorf("subject %q does not start with %q", c.Subject, l.SubjectPrefix)
	}
	for _, s := range c.Scopes {
		if !slices.Contains(l.Scopes, s) {
			return fmt.Errorf("scope %s is beyond the key's", s)
		}
	}
	if c.IssuedAt.IsZero() || c.Expires.Sub(c.IssuedAt) > l.MaxLifetime {
		return fmt.Errorf("lifetime %s is beyond the key's %s", c.Expires.Sub(c.IssuedAt), l.MaxLifetime)
	}
	if c.CentralManager != "" || c.PondID != "" {
		return errors.New("a delegated key signs no pond grant")
	}
	return nil
}

// WriteTrustedKeys stores full keys and delegated keys at path.
func WriteTrustedKeys(path string, keys []ed25519.PublicKey, delegated []DelegatedKey) error {
	var blocks []*pem.Block
	for _, k := range keys {
		der, err := x509.MarshalPKIXPublicKey(k)
		if err != nil {
			return fmt.Errorf("encoding public key: %w", err)
		}
		blocks = append(blocks, &pem.Block{Type: publicBlock, Bytes: der})
	}
	for _, d := range delegated {
		if err := d.Limits.check(); err != nil {
			return fmt.Errorf("delegated key %q: %w", d.Limits.Name, err)
		}
		der, err := x509.MarshalPKIXPublicKey(d.Key)
		if err != nil {
			return fmt.Errorf("encoding public key: %w", err)
		}
		var sc []string
		for _, s := range d.Limits.Scopes {
			sc = append(sc, string(s))
		}
		blocks = append(blocks, &pem.Block{Type: delegatedBlock, Bytes: der, Headers: map[string]string{
			"Name": d.Limits.Name, "Subject-Prefix": d.Limits.SubjectPrefix, "Scopes": strings.Join(sc, " "),
			"Max-Lifetime": d.Limits.MaxLifetime.String()}})
	}
	return writePEM(path, blocks, 0o600)
}

// ReadTrustedKeys reads the full and the delegated keys at path.
func ReadTrustedKeys(path string) ([]ed25519.PublicKey, []DelegatedKey, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	var keys []ed25519.PublicKey
	var delegated []DelegatedKey
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			break
		}
		k, err := x509.ParsePKIXPublicKey(b.Bytes)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", path, err)
		}
		pub, ok := k.(ed25519.PublicKey)
		if !ok {
			return nil, nil, fmt.Errorf("%s: not an Ed25519 key", path)
		}
		switch b.Type {
		case publicBlock:
			keys = append(keys, pub)
		case delegatedBlock:
			l := KeyLimits{Name: b.Headers["Name"], SubjectPrefix: b.Headers["Subject-Prefix"]}
			for _, s := range strings.Fields(b.Headers["Scopes"]) {
				sc, err := ParseScope(s)
				if err != nil {
					return nil, nil, fmt.Errorf("%s: delegated key %q: %w", path, l.Name, err)
				}
				l.Scopes = append(l.Scopes, sc)
			}
			if l.MaxLifetime, err = time.ParseDuration(b.Headers["Max-Lifetime"]); err != nil {
				return nil, nil, fmt.Errorf("%s: delegated key %q: Max-Lifetime: %w", path, l.Name, err)
			}
			if err := l.check(); err != nil {
				return nil, nil, fmt.Errorf("%s: delegated key %q: %w", path, l.Name, err)
			}
			delegated = append(delegated, DelegatedKey{Key: pub, Limits: l})
		default:
			return nil, nil, fmt.Errorf("%s: a %q block where a public key was expected", path, b.Type)
		}
	}
	if len(trimSpace(data)) != 0 {
		return nil, nil, errors.New(path + ": not a PEM file")
	}
	if len(keys) == 0 {
		return nil, nil, fmt.Errorf("%s: no public key", path)
	}
	return keys, delegated, nil
}

// Delegate makes a new signing key whose tokens verifiers accept only
// within limits, adds it to the authority's trusted keys, and returns it:
// the caller gives it to the program that signs with it (WriteSigningKey)
// and the new trusted keys to every node, as after a key rotation.
func (a *Authority) Delegate(limits KeyLimits) (*SigningKey, error) {
	if err := limits.check(); err != nil {
		return nil, fmt.Errorf("delegated key: %w", err)
	}
	k, err := NewSigningKey()
	if err != nil {
		return nil, err
	}
	err = a.locked(func() error {
		path := filepath.Join(a.dir, TrustedKeysFile)
		keys, delegated, err := ReadTrustedKeys(path)
		if err != nil {
			return err
		}
		delegated = append(delegated, DelegatedKey{Key: k.Public(), Limits: limits})
		return WriteTrustedKeys(path, keys, delegated)
	})
	if err != nil {
		return nil, err
	}
	return k, nil
}

// MintDelegated signs c with a delegated key k, after checking it against
// the key's limits as a verifier will.
func MintDelegated(k *SigningKey, limits KeyLimits, issuer string, c Claims) (string, error) {
	c.Issuer = issuer
	if err := limits.allows(&c); err != nil {
		return "", fmt.Errorf("delegated key %q: %w", limits.Name, err)
	}
	return Mint(k, c)
}

// WatchDelegated returns a function giving the delegated keys of the
// trusted keys file at path (a Verifier's MoreDelegated), read again when
// its modification time or size changes. The file is looked at once every
// fileCheckInterval at most, as a certificate file is (see fileCache):
// every request's token is checked against these keys, and a stat at each,
// made with the watch locked, queued hundreds of requests behind each
// other's system calls in a busy central manager. A key not found among
// the keys given is looked for in the file at once (fresh): a key
// delegated a moment ago is trusted at its first use. A file that cannot
// be read keeps the keys last read.
func WatchDelegated(path string) func(fresh bool) []DelegatedKey {
	c := &fileCache[[]DelegatedKey]{paths: []string{path}, load: func() ([]DelegatedKey, error) {
		_, ds, err := ReadTrustedKeys(path)
		return ds, err
	}}
	return func(fresh bool) []DelegatedKey {
		keys, _ := c.look(fresh)
		return keys
	}
}
