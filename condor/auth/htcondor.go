package auth

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/crypto/hkdf"
)

// HTCondor-format tokens are the IDTOKENS HTCondor's own clients read from
// their token directory (SEC_TOKEN_DIRECTORY): JWTs signed with HMAC-SHA256
// (HS256) under a key derived from a shared signing key, which the header
// names in "kid" ("POOL" for the pool's). Unlike pond's own tokens, whose
// public half a node can hold without being able to mint, whoever can check
// an HTCondor token can also make one: the key stays with the authority and
// with the daemons that verify.

// HTCondorPoolKey is the key ID of a pool's signing key, HTCondor's default.
const HTCondorPoolKey = "POOL"

// HTCondorKeysDir is where an authority keeps its HTCondor signing keys,
// one file a key ID, in the file format of HTCondor's
// SEC_PASSWORD_DIRECTORY: a key can be copied into an HTCondor pool's
// passwords.d for its daemons to accept pond's tokens.
const HTCondorKeysDir = "passwords.d"

// htcondorKeyLen is the length of the password of a new signing key, as
// HTCondor's collector makes one.
const htcondorKeyLen = 64

// scramble is HTCondor's "simple scramble" of a password file's bytes, its
// own inverse.
var scramble = [4]byte{0xde, 0xad, 0xbe, 0xef}

// HTCondorKey is a signing key of HTCondor-format tokens.
type HTCondorKey struct {
	id       string
	password []byte
}

// validKeyID reports whether id may be a key ID, which names a file: 1
// to 128 of A-Z, a-z, 0-9, '_', '.' and '-', not starting with '.' or
// '-'. (A regular expression of it took some 2 ms and 1,700 allocations
// to compile as every pondctl process, each job's supervisor too, started.)
func validKeyID(id string) bool {
	if len(id) == 0 || len(id) > 128 || id[0] == '.' || id[0] == '-' {
		return false
	}
	for i := 0; i < len(id); i++ {
		switch c := id[i]; {
		case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '_', c == '.', c == '-':
		default:
			return false
		}
	}
	return true
}

// NewHTCondorKey makes a random signing key named id.
func NewHTCondorKey(id string) (*HTCondorKey, error) {
	if !validKeyID(id) {
		return nil, fmt.Errorf("invalid key ID %q: letters, digits, '_', '.', '-'", id)
	}
	pw := make([]byte, 0, htcondorKeyLen)
	var b [1]byte
	for len(pw) < htcondorKeyLen {
		if _, err := rand.Read(b[:]); err != nil {
			return nil, fmt.Errorf("making a signing key: %w", err)
		}
		// HTCondor cuts a password at its first NUL, in the file and
		// once unscrambled: a byte that would be one is drawn again.
		if b[0] == 0 || b[0] == scramble[len(pw)%4] {
			continue
		}
		pw = append(pw, b[0])
	}
	return &HTCondorKey{id: id, password: pw}, nil
}

// ID is the key's name, the "kid" of the tokens it signs.
func (k *HTCondorKey) ID() string { return k.id }

// jwtKey is the HS256 key HTCondor derives from the password: HKDF-SHA256
// with salt "htcondor" and info "master jwt", of the password twice over
// for the pool's key.
func (k *HTCondorKey) jwtKey() []byte {
	ikm := k.password
	if k.id == HTCondorPoolKey {
		ikm = append(append([]byte(nil), k.password...), k.password...)
	}
	out := make([]byte, 32)
	if _, err := io.ReadFull(hkdf.New(sha256.New, ikm, []byte("htcondor"), []byte("master jwt")), out); err != nil {
		panic("hkdf: " + err.Error()) // 32 bytes of HKDF-SHA256 cannot fail
	}
	return out
}

// WriteHTCondorKey stores k at path (mode 0600) in HTCondor's password
// file format.
func WriteHTCondorKey(path string, k *HTCondorKey) error {
	return WriteFile(path, scrambled(k.password), 0o600)
}

// ReadHTCondorKey reads the signing key named id at path, as HTCondor reads
// a password file: the bytes up to the first NUL, unscrambled, up to the
// first NUL. A file others than its owner may read is refused.
func ReadHTCondorKey(path, id string) (*HTCondorKey, error) {
	if !validKeyID(id) {
		return nil, fmt.Errorf("invalid key ID %q", id)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%s: a signing key must be readable by its owner alone (mode %04o; chmod 600 it)", path, fi.Mode().Perm())
	}
	if fi.Size() > 1<<16 {
		return nil, fmt.Errorf("%s: %d bytes is too large for a signing key", path, fi.Size())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if i := bytes.IndexByte(data, 0); i >= 0 {
		data = data[:i]
	}
	pw := scrambled(data)
	if i := bytes.IndexByte(pw, 0); i >= 0 {
		pw = pw[:i]
	}
	if len(pw) == 0 {
		return nil, fmt.Errorf("%s: empty signing key", path)
	}
	return &HTCondorKey{id: id, password: pw}, nil
}

func scrambled(b []byte) []byte {
	out := make([]byte, len(b))
	for i, c := range b {
		out[i] = c ^ scramble[i%4]
	}
	return out
}

// htcondorHeader and htcondorPayload are an HTCondor token's JSON parts.
type htcondorHeader struct {
	Alg string `json:"alg"`
	Typ string `json:"typ,omitempty"`
	Kid string `json:"kid"`
}

type htcondorPayload struct {
	Issuer  string   `json:"iss"`
	Subject string   `json:"sub"`
	Scope   string   `json:"scope,omitempty"`
	ID      string   `json:"jti"`
	Issued  *float64 `json:"iat,omitempty"`
	Expires *float64 `json:"exp,omitempty"`
	Before  *float64 `json:"nbf,omitempty"`
}

var b64 = base64.RawURLEncoding

// MintHTCondor signs c with k as an HTCondor-format token: HS256, "kid" the
// key's ID, "iss" the trust domain (c.Issuer), "sub" user@domain, "scope"
// the scopes' full names, "iat", "exp", "jti". c must name its issuer and
// subject, grant at least one scope and expire.
func MintHTCondor(k *HTCondorKey, c Claims) (string, error) {
	if err := c.complete(); err != nil {
		return "", err
	}
	names := c.scopeNames()
	iat, exp := float64(c.IssuedAt.Unix()), float64(c.Expires.Unix())
	hdr, err := json.Marshal(htcondorHeader{Alg: "HS256", Typ: "JWT", Kid: k.id})
	if err != nil {
		return "", err
	}
	pl, err := json.Marshal(htcondorPayload{Issuer: c.Issuer, Subject: c.Subject, Scope: strings.Join(names, " "), ID: c.ID,
		Issued: &iat, Expires: &exp})
	if err != nil {
		return "", err
	}
	signed := b64.EncodeToString(hdr) + "." + b64.EncodeToString(pl)
	return signed + "." + b64.EncodeToString(hs256(k.jwtKey(), signed)), nil
}

func hs256(key []byte, signed string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(signed))
	return m.Sum(nil)
}

// MaxHTCondorToken bounds the length of an HTCondor token pond reads.
const MaxHTCondorToken = 64 << 10

// HTCondorVerifier checks HTCondor-format tokens.
type HTCondorVerifier struct {
	// Issuer is the trust domain: the only "iss" accepted.
	Issuer string
	// Keys are the signing keys trusted, by key ID.
	Keys map[string]*HTCondorKey
	// Revoked, when set, reports whether a token ID was revoked.
	Revoked func(id string) bool
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// Leeway is the clock skew tolerated on expiry and issue times.
	Leeway time.Duration
}

// KeyIDs lists the IDs of the trusted keys, which a server shows its
// clients so that they pick a token it can check.
func (v *HTCondorVerifier) KeyIDs() []string {
	ids := make([]string, 0, len(v.Keys))
	for id := range v.Keys {
		ids = append(ids, id)
	}
	return ids
}

// Verify checks a whole token, "header.payload.signature", and returns its
// claims.
func (v *HTCondorVerifier) Verify(token string) (*Claims, error) {
	signed, sig, ok := cutLast(token)
	if !ok {
		return nil, fmt.Errorf("%w: not a JWT", ErrInvalid)
	}
	want, c, err := v.Sign(signed)
	if err != nil {
		return nil, err
	}
	got, err := b64.DecodeString(sig)
	if err != nil || subtle.ConstantTimeCompare(got, want) != 1 {
		return nil, fmt.Errorf("%w: bad signature", ErrInvalid)
	}
	return c, nil
}

func cutLast(s string) (string, string, bool) {
	i := strings.LastIndexByte(s, '.')
	if i < 0 {
		return "", "", false
	}
	return s[:i], s[i+1:], true
}

// Sign checks the signed part of a token, "header.payload", as IDTOKENS'
// server side does (it never sees the signature: the client proves it
// knows it): the key it names is trusted, the issuer is the trust domain,
// it has a subject and an ID, is not expired, not revoked. It returns the
// signature the token must carry and the claims. Scopes pond does not know
// grant nothing.
func (v *HTCondorVerifier) Sign(signed string) ([]byte, *Claims, error) {
	hdr, pl, err := parseHTCondorToken(signed)
	if err != nil {
		return nil, nil, err
	}
	if hdr.Alg != "HS256" {
		return nil, nil, fmt.Errorf("%w: algorithm %q, want HS256", ErrInvalid, hdr.Alg)
	}
	k := v.Keys[hdr.Kid]
	if k == nil {
		return nil, nil, fmt.Errorf("%w: signed with key %q, which is not trusted", ErrInvalid, hdr.Kid)
	}
	if pl.Issuer != v.Issuer {
		return nil, nil, fmt.Errorf("%w: issuer %q, want %q", ErrInvalid, pl.Issuer, v.Issuer)
	}
	if pl.Subject == "" || pl.ID == "" {
		return nil, nil, fmt.Errorf("%w: no subject or no token ID", ErrInvalid)
	}
	now := time.Now
	if v.Now != nil {
		now = v.Now
	}
	t := now()
	if pl.Expires == nil {
		return nil, nil, fmt.Errorf("%w: no expiry", ErrInvalid)
	}
	exp := unixTime(*pl.Expires)
	if !t.Before(exp.Add(v.Leeway)) {
		return nil, nil, fmt.Errorf("%w: expired %s ago", ErrExpired, t.Sub(exp).Round(time.Second))
	}
	var iat time.Time
	if pl.Issued != nil {
		iat = unixTime(*pl.Issued)
		if iat.After(t.Add(v.Leeway)) {
			return nil, nil, fmt.Errorf("%w: issued in the future (%s)", ErrInvalid, iat.UTC().Format(time.RFC3339))
		}
	}
	if pl.Before != nil && unixTime(*pl.Before).After(t.Add(v.Leeway)) {
		return nil, nil, fmt.Errorf("%w: not valid before %s", ErrInvalid, unixTime(*pl.Before).UTC().Format(time.RFC3339))
	}
	if v.Revoked != nil && v.Revoked(pl.ID) {
		return nil, nil, fmt.Errorf("%w: %s", ErrRevoked, pl.ID)
	}
	c := &Claims{Issuer: pl.Issuer, Subject: pl.Subject, ID: pl.ID, IssuedAt: iat, Expires: exp}
	// A subject of the trust domain is the user alone, as pond's own
	// tokens name it.
	if user, domain, ok := strings.Cut(pl.Subject, "@"); ok && domain == v.Issuer && user != "" {
		c.Subject = user
	}
	for _, s := range strings.FieldsFunc(pl.Scope, func(r rune) bool { return r == ' ' || r == ',' }) {
		if sc, err := ParseScope(s); err == nil && strings.Contains(s, ":/") {
			c.Scopes = append(c.Scopes, sc)
		}
	}
	return hs256(k.jwtKey(), signed), c, nil
}

func unixTime(f float64) time.Time {
	if math.IsNaN(f) || f > 1<<40 {
		f = 1 << 40
	}
	if f < -(1 << 40) {
		f = -(1 << 40)
	}
	return time.Unix(int64(f), 0)
}

// parseHTCondorToken decodes the signed part of a token, "header.payload"
// (base64url of JSON each), without checking anything but its form.
func parseHTCondorToken(signed string) (*htcondorHeader, *htcondorPayload, error) {
	if len(signed) > MaxHTCondorToken {
		return nil, nil, fmt.Errorf("%w: %d bytes, over %d", ErrInvalid, len(signed), MaxHTCondorToken)
	}
	h, p, ok := strings.Cut(signed, ".")
	if !ok || strings.Contains(p, ".") {
		return nil, nil, fmt.Errorf("%w: want header.payload", ErrInvalid)
	}
	var hdr htcondorHeader
	if err := decodePart(h, &hdr); err != nil {
		return nil, nil, fmt.Errorf("%w: header: %v", ErrInvalid, err)
	}
	var pl htcondorPayload
	if err := decodePart(p, &pl); err != nil {
		return nil, nil, fmt.Errorf("%w: payload: %v", ErrInvalid, err)
	}
	return &hdr, &pl, nil
}

func decodePart(part string, v any) error {
	raw, err := b64.DecodeString(strings.TrimRight(part, "="))
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("data after the JSON object")
	}
	return nil
}

// FormatHTCondor marks the records of HTCondor-format tokens.
const FormatHTCondor = "htcondor"

// htcondorKey reads the authority's pool signing key of HTCondor-format
// tokens, making it when there is none (an authority made before pond
// issued them gets one then). The caller holds the directory's lock.
func (a *Authority) htcondorKey() (*HTCondorKey, error) {
	dir := filepath.Join(a.dir, HTCondorKeysDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, HTCondorPoolKey)
	k, err := ReadHTCondorKey(path, HTCondorPoolKey)
	if !errors.Is(err, fs.ErrNotExist) {
		return k, err
	}
	if k, err = NewHTCondorKey(HTCondorPoolKey); err != nil {
		return nil, err
	}
	if err := WriteHTCondorKey(path, k); err != nil {
		return nil, err
	}
	return k, nil
}

// HTCondorSubject is the "sub" of an HTCondor-format token for subject:
// user@domain, the authority's trust domain (its issuer) when subject
// names none.
func (a *Authority) HTCondorSubject(subject string) string {
	if strings.Contains(subject, "@") {
		return subject
	}
	return subject + "@" + a.issuer
}

// IssueHTCondor makes an HTCondor-format token (IDTOKENS) for subject with
// scopes that lasts lifetime and records it, so that it can be listed and
// revoked like the authority's own tokens. The subject is made user@domain
// (HTCondorSubject).
func (a *Authority) IssueHTCondor(subject string, scopes []Scope, lifetime time.Duration) (string, Issued, error) {
	if subject == "" || strings.HasPrefix(subject, "@") || strings.HasSuffix(subject, "@") {
		return "", Issued{}, fmt.Errorf("invalid subject %q: want user or user@domain", subject)
	}
	return a.issue(Claims{Subject: a.HTCondorSubject(subject), Scopes: scopes}, lifetime, FormatHTCondor)
}

// HTCondorVerifier checks the HTCondor-format tokens of this authority:
// signed with its pool key, of its trust domain, not revoked.
func (a *Authority) HTCondorVerifier() *HTCondorVerifier {
	return &HTCondorVerifier{Issuer: a.issuer, Keys: map[string]*HTCondorKey{a.htcondor.ID(): a.htcondor},
		Revoked: Revocations(filepath.Join(a.dir, RevokedFile))}
}

// HTCondorTokenSubject returns the "sub" of a token's signed part,
// unchecked.
func HTCondorTokenSubject(signed string) (string, error) {
	_, pl, err := parseHTCondorToken(signed)
	if err != nil {
		return "", err
	}
	return pl.Subject, nil
}

// HTCondorKeyFile is the file of the authority's pool signing key of
// HTCondor-format tokens (passwords.d/POOL in its directory), which the
// agents that serve HTCondor's clients are given with -htcondor-key.
func (a *Authority) HTCondorKeyFile() string {
	return filepath.Join(a.dir, HTCondorKeysDir, HTCondorPoolKey)
}

// IsHTCondorToken reports whether token has the form of an HTCondor-format
// token (an HS256 JWT), unchecked: pond's own tokens are signed otherwise.
func IsHTCondorToken(token string) bool {
	signed, _, ok := cutLast(token)
	if !ok {
		return false
	}
	hdr, _, err := parseHTCondorToken(signed)
	return err == nil && hdr.Alg == "HS256"
}
