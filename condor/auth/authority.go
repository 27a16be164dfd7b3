package auth

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Files of an authority's directory.
const (
	// SigningKeyFile holds the signing key (mode 0600).
	SigningKeyFile = "signing.key"
	// TrustedKeysFile holds the public keys verifiers trust: what agents
	// are given with -trusted-keys.
	TrustedKeysFile = "trusted.pem"
	// RevokedFile lists the IDs of revoked tokens, one a line: what
	// verifiers read with Revocations.
	RevokedFile = "revoked"
	// recordFile holds the issuer and the record of issued tokens.
	recordFile = "authority.json"
)

// Authority issues tokens for one working directory: it holds the signing
// key, the issuer name, and the record of the tokens it issued and
// revoked, in a directory only its owner may enter (.pond/auth).
type Authority struct {
	dir string
	key *SigningKey
	// htcondor signs the authority's HTCondor-format tokens.
	htcondor *HTCondorKey
	issuer   string
	mu       sync.Mutex
}

// Issued records a token the authority made (never the token itself).
type Issued struct {
	ID       string    `json:"id"`
	Subject  string    `json:"subject"`
	Scopes   []Scope   `json:"scopes"`
	IssuedAt time.Time `json:"issued_at"`
	Expires  time.Time `json:"expires"`
	Revoked  bool      `json:"revoked,omitempty"`
	// CentralManager is the central manager a pond grant is bound to.
	CentralManager string `json:"central_manager,omitempty"`
	// Format is "htcondor" for an HTCondor-format token (IssueHTCondor),
	// empty for pond's own.
	Format string `json:"format,omitempty"`
}

type record struct {
	Issuer string   `json:"issuer"`
	Tokens []Issued `json:"tokens"`
}

// OpenAuthority opens the authority kept in dir, making its directory (mode
// 0700), signing key, trusted keys and issuer name the first time. Two
// processes opening a new directory at once end up with the same key. The
// CA (CACertFile, CAKeyFile) is made when the first certificate is issued:
// a sea speaks TLS from then on.
func OpenAuthority(dir string) (*Authority, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("authority: %w", err)
	}
	a := &Authority{dir: dir}
	var err error
	err = a.locked(func() error {
		if a.key, err = a.signingKey(); err != nil {
			return err
		}
		if a.htcondor, err = a.htcondorKey(); err != nil {
			return err
		}
		rec, err := a.read()
		if err != nil {
			return err
		}
		if rec.Issuer == "" {
			var b [8]byte
			if _, err := rand.Read(b[:]); err != nil {
				return err
			}
			rec.Issuer = "pond-" + hex.EncodeToString(b[:])
			if err := a.write(rec); err != nil {
				return err
			}
		}
		a.issuer = rec.Issuer
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("authority %s: %w", dir, err)
	}
	return a, nil
}

// signingKey reads the signing key, making it (and the trusted keys) when
// there is none. The caller holds the directory's lock.
func (a *Authority) signingKey() (*SigningKey, error) {
	path := filepath.Join(a.dir, SigningKeyFile)
	k, err := ReadSigningKey(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return k, err
	}
	if k, err = NewSigningKey(); err != nil {
		return nil, err
	}
	if err := WritePublicKeys(filepath.Join(a.dir, TrustedKeysFile), k.Public()); err != nil {
		return nil, err
	}
	if err := WriteSigningKey(path, k); err != nil {
		return nil, err
	}
	return k, nil
}

// Dir is the authority's directory.
func (a *Authority) Dir() string { return a.dir }

// Issuer is the name in the "iss" claim of the authority's tokens.
func (a *Authority) Issuer() string { return a.issuer }

// Verifier checks the tokens of this authority: signed with its key, of
// its issuer, not revoked.
func (a *Authority) Verifier() *Verifier {
	return &Verifier{Issuer: a.issuer, Keys: []ed25519.PublicKey{a.key.Public()}, Revoked: Revocations(filepath.Join(a.dir, RevokedFile))}
}

// Mint makes a token for subject with scopes that lasts lifetime, without
// recording it: for pondctl's own short-lived calls.
func (a *Authority) Mint(subject string, scopes []Scope, lifetime time.Duration) (string, error) {
	now := time.Now()
	return Mint(a.key, Claims{Issuer: a.issuer, Subject: subject, Scopes: scopes, IssuedAt: now, Expires: now.Add(lifetime)})
}

// Issue makes a token for subject with scopes that lasts lifetime and
// records it, so that it can be listed and revoked.
func (a *Authority) Issue(subject string, scopes []Scope, lifetime time.Duration) (string, Issued, error) {
	return a.issue(Claims{Subject: subject, Scopes: scopes}, lifetime, "")
}

// IssueGrant is Issue for a token that is also a pond grant bound to the
// central manager at API address cm (see Claims.MayInvite): what a
// central manager that runs a pond policy invites nodes with.
func (a *Authority) IssueGrant(subject string, scopes []Scope, cm string, lifetime time.Duration) (string, Issued, error) {
	if cm == "" {
		return "", Issued{}, errors.New("a pond grant needs a central manager")
	}
	return a.issue(Claims{Subject: subject, Scopes: scopes, CentralManager: cm}, lifetime, "")
}

// MintGrant makes a pond grant that lets subject invite nodes into pond
// pondID under the central manager at API address cm for lifetime, without
// recording it: what pondctl presents when it applies a pond.
func (a *Authority) MintGrant(subject, pondID, cm string, lifetime time.Duration) (string, error) {
	if cm == "" || pondID == "" {
		return "", errors.New("a pond grant needs a pond and a central manager")
	}
	now := time.Now()
	return Mint(a.key, Claims{Issuer: a.issuer, Subject: subject, Scopes: []Scope{SeaWrite}, IssuedAt: now, Expires: now.Add(lifetime),
		CentralManager: cm, PondID: pondID})
}

// issue makes and records a token of format ("" for pond's own, FormatHTCondor).
func (a *Authority) issue(c Claims, lifetime time.Duration, format string) (string, Issued, error) {
	if lifetime <= 0 {
		return "", Issued{}, errors.New("a token's lifetime must be more than zero")
	}
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", Issued{}, err
	}
	now := time.Now().UTC().Truncate(time.Second)
	iss := Issued{ID: hex.EncodeToString(b[:]), Subject: c.Subject, Scopes: c.Scopes, IssuedAt: now, Expires: now.Add(lifetime),
		CentralManager: c.CentralManager, Format: format}
	c.Issuer, c.ID, c.IssuedAt, c.Expires = a.issuer, iss.ID, now, iss.Expires
	mint := func(c Claims) (string, error) { return Mint(a.key, c) }
	if format == FormatHTCondor {
		mint = func(c Claims) (string, error) { return MintHTCondor(a.htcondor, c) }
	}
	tok, err := mint(c)
	if err != nil {
		return "", Issued{}, err
	}
	err = a.locked(func() error {
		rec, err := a.read()
		if err != nil {
			return err
		}
		rec.Tokens = append(rec.Tokens, iss)
		return a.write(rec)
	})
	if err != nil {
		return "", Issued{}, err
	}
	return tok, iss, nil
}

// List returns the issued tokens, oldest first.
func (a *Authority) List() ([]Issued, error) {
	var out []Issued
	err := a.locked(func() error {
		rec, err := a.read()
		out = rec.Tokens
		return err
	})
	return out, err
}

// Revoke revokes the token whose ID is id (or an unambiguous prefix of
// it): its ID is added to the revoked file every verifier of the
// authority reads.
func (a *Authority) Revoke(id string) (Issued, error) {
	var done Issued
	err := a.locked(func() error {
		rec, err := a.read()
		if err != nil {
			return err
		}
		i := -1
		for j, t := range rec.Tokens {
			if id != "" && strings.HasPrefix(t.ID, id) {
				if i >= 0 {
					return fmt.Errorf("token ID %q is ambiguous: name more of it", id)
				}
				i = j
			}
		}
		if i < 0 {
			return fmt.Errorf("no token %q was issued here", id)
		}
		rec.Tokens[i].Revoked = true
		done = rec.Tokens[i]
		var ids []string
		for _, t := range rec.Tokens {
			if t.Revoked {
				ids = append(ids, t.ID)
			}
		}
		if err := WriteFile(filepath.Join(a.dir, RevokedFile), []byte(strings.Join(ids, "\n")+"\n"), 0o600); err != nil {
			return err
		}
		return a.write(rec)
	})
	return done, err
}

// Prune removes the records of the tokens that expired before before (a
// day ago, say), which no verifier accepts any longer, and their IDs from
// the revoked file, and returns them. The records of tokens that have not
// expired, revoked or not, stay, and so does every other line of the
// revoked file.
func (a *Authority) Prune(before time.Time) ([]Issued, error) {
	var pruned []Issued
	err := a.locked(func() error {
		rec, err := a.read()
		if err != nil {
			return err
		}
		kept := rec.Tokens[:0:0]
		gone := map[string]bool{}
		for _, t := range rec.Tokens {
			if t.Expires.Before(before) {
				pruned = append(pruned, t)
				gone[t.ID] = true
			} else {
				kept = append(kept, t)
			}
		}
		if len(pruned) == 0 {
			return nil
		}
		path := filepath.Join(a.dir, RevokedFile)
		data, err := os.ReadFile(path)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if err == nil {
			var ids []string
			for _, id := range strings.Fields(string(data)) {
				if !gone[id] {
					ids = append(ids, id)
				}
			}
			if err := WriteFile(path, []byte(strings.Join(append(ids, ""), "\n")), 0o600); err != nil {
				return err
			}
		}
		rec.Tokens = kept
		return a.write(rec)
	})
	if err != nil {
		return nil, err
	}
	return pruned, nil
}

// locked runs f holding the directory's lock, shared by every pondctl.
func (a *Authority) locked(f func() error) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	lf, err := os.OpenFile(filepath.Join(a.dir, ".lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	defer lf.Close()
	if err := syscall.Flock(int(lf.Fd()), syscall.LOCK_EX); err != nil {
		return err
	}
	defer syscall.Flock(int(lf.Fd()), syscall.LOCK_UN)
	return f()
}

func (a *Authority) read() (record, error) {
	var rec record
	data, err := os.ReadFile(filepath.Join(a.dir, recordFile))
	if errors.Is(err, fs.ErrNotExist) {
		return rec, nil
	}
	if err != nil {
		return rec, err
	}
	if err := json.Unmarshal(data, &rec); err != nil {
		return rec, fmt.Errorf("%s: %w", recordFile, err)
	}
	return rec, nil
}

func (a *Authority) write(rec record) error {
	data, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	return WriteFile(filepath.Join(a.dir, recordFile), append(data, '\n'), 0o600)
}

// WriteFile writes a credential or a configuration file whole or not at
// all: data goes to a temporary file in path's directory, mode perm,
// synced and renamed over path.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// AuthorityDir is where a working directory keeps its authority.
const AuthorityDir = ".pond/auth"

// ownTokenLifetime is how long the tokens FindToken makes last.
const ownTokenLifetime = 10 * time.Minute

// FindToken returns the token a client of a working directory presents to
// agents and to the daemons of its pools: POND_TOKEN, else the contents of
// the file POND_TOKEN_FILE names, else, when workDir has an authority, a
// ten-minute token of its own that administers the sea and its pools, whose
// subject is the name of the user running the client (so that the jobs it
// submits are that user's); else "" (no token). getenv reads the
// environment.
func FindToken(getenv func(string) string, workDir string) (string, error) {
	if t := getenv("POND_TOKEN"); t != "" {
		return t, nil
	}
	if f := getenv("POND_TOKEN_FILE"); f != "" {
		data, err := os.ReadFile(f)
		if err != nil {
			return "", fmt.Errorf("POND_TOKEN_FILE: %w", err)
		}
		return strings.TrimSpace(string(data)), nil
	}
	a, err := existingAuthority(getenv, workDir)
	if a == nil || err != nil {
		return "", err
	}
	return a.Mint(osUser(getenv), []Scope{SeaAdmin, Administrator}, ownTokenLifetime)
}

// existingAuthority opens the authority a client of workDir finds
// (FindAuthorityDir), or returns nil when it has none: a client never
// makes one.
func existingAuthority(getenv func(string) string, workDir string) (*Authority, error) {
	dir := FindAuthorityDir(getenv, workDir)
	if _, err := os.Stat(filepath.Join(dir, SigningKeyFile)); err != nil {
		return nil, nil
	}
	return OpenAuthority(dir)
}

// osUser is the name of the user running the process: user.Current's,
// else USER, else "pondctl".
func osUser(getenv func(string) string) string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	if u := getenv("USER"); u != "" {
		return u
	}
	return "pondctl"
}

// Revocations returns a function that reports whether a token ID is listed
// in the revoked file at path, reading the file again whenever it changes.
// A missing file revokes nothing.
func Revocations(path string) func(id string) bool {
	var (
		mu   sync.Mutex
		mod  time.Time
		size int64 = -1
		ids  []string
	)
	return func(id string) bool {
		mu.Lock()
		defer mu.Unlock()
		fi, err := os.Stat(path)
		switch {
		case err != nil:
			ids, size = nil, -1
		case !fi.ModTime().Equal(mod) || fi.Size() != size:
			mod, size = fi.ModTime(), fi.Size()
			data, err := os.ReadFile(path)
			if err == nil {
				ids = strings.Fields(string(data))
			}
		}
		return slices.Contains(ids, id)
	}
}
