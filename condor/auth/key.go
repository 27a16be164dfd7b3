package auth

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
)

// SigningKey makes tokens. Only the holder of a pool's or a sea's signing
// key (the operator's working directory) has it; the nodes that check
// tokens hold its public half.
type SigningKey struct {
	id   string
	priv ed25519.PrivateKey
}

// NewSigningKey makes a new random signing key.
func NewSigningKey() (*SigningKey, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("making a signing key: %w", err)
	}
	return &SigningKey{id: keyID(priv.Public().(ed25519.PublicKey)), priv: priv}, nil
}

// ID names the key in the tokens it signs (their "kid" header), so that a
// verifier that trusts several keys, during a rotation, knows which to use.
func (k *SigningKey) ID() string { return k.id }

// Public is the key's public half, for verifiers.
func (k *SigningKey) Public() ed25519.PublicKey { return k.priv.Public().(ed25519.PublicKey) }

// keyID is the first eight bytes of the public key's SHA-256, in hex.
func keyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return hex.EncodeToString(sum[:8])
}

// PEM block types of key files.
const (
	privateBlock = "PRIVATE KEY"
	publicBlock  = "PUBLIC KEY"
)

// WriteSigningKey stores k at path (mode 0600, PKCS #8 PEM), through a
// temporary file renamed over path.
func WriteSigningKey(path string, k *SigningKey) error {
	der, err := x509.MarshalPKCS8PrivateKey(k.priv)
	if err != nil {
		return fmt.Errorf("encoding signing key: %w", err)
	}
	return writePEM(path, []*pem.Block{{Type: privateBlock, Bytes: der}}, 0o600)
}

// ReadSigningKey reads a signing key that WriteSigningKey stored. A key
// file that others than its owner may read is refused.
func ReadSigningKey(path string) (*SigningKey, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%s: a signing key must be readable by its owner alone (mode %04o; chmod 600 it)", path, fi.Mode().Perm())
	}
	blocks, err := readPEM(path, privateBlock)
	if err != nil {
		return nil, err
	}
	if len(blocks) != 1 {
		return nil, fmt.Errorf("%s: want one signing key, found %d", path, len(blocks))
	}
	key, err := x509.ParsePKCS8PrivateKey(blocks[0])
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	priv, ok := key.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%s: not an Ed25519 key", path)
	}
	return &SigningKey{id: keyID(priv.Public().(ed25519.PublicKey)), priv: priv}, nil
}

// WritePublicKeys stores the public keys a verifier trusts at path, one
// PEM block each. They are no secret, but the file is 0600 as everything
// else in an authority's directory, so that a check of the directory finds
// nothing others may read; copy it to give it to a node of another user.
func WritePublicKeys(path string, keys ...ed25519.PublicKey) error {
	var blocks []*pem.Block
	for _, k := range keys {
		der, err := x509.MarshalPKIXPublicKey(k)
		if err != nil {
			return fmt.Errorf("encoding public key: %w", err)
		}
		blocks = append(blocks, &pem.Block{Type: publicBlock, Bytes: der})
	}
	return writePEM(path, blocks, 0o600)
}

// ReadPublicKeys reads the keys WritePublicKeys stored.
func ReadPublicKeys(path string) ([]ed25519.PublicKey, error) {
	blocks, err := readPEM(path, publicBlock)
	if err != nil {
		return nil, err
	}
	if len(blocks) == 0 {
		return nil, fmt.Errorf("%s: no public key", path)
	}
	out := make([]ed25519.PublicKey, 0, len(blocks))
	for _, der := range blocks {
		key, err := x509.ParsePKIXPublicKey(der)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		pub, ok := key.(ed25519.PublicKey)
		if !ok {
			return nil, fmt.Errorf("%s: not an Ed25519 key", path)
		}
		out = append(out, pub)
	}
	return out, nil
}

// writePEM stores blocks at path with mode perm, through a temporary file
// renamed over path.
func writePEM(path string, blocks []*pem.Block, perm os.FileMode) error {
	var data []byte
	for _, b := range blocks {
		data = append(data, pem.EncodeToMemory(b)...)
	}
	return WriteFile(path, data, perm)
}

// readPEM returns the DER bytes of the blocks of type typ in the file at
// path; any other content is an error.
func readPEM(path, typ string) ([][]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out [][]byte
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			break
		}
		if b.Type != typ {
			return nil, fmt.Errorf("%s: a %q block where a %q was expected", path, b.Type, typ)
		}
		out = append(out, b.Bytes)
	}
	if len(trimSpace(data)) != 0 {
		return nil, errors.New(path + ": not a PEM file")
	}
	return out, nil
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\n' || b[0] == '\r' || b[0] == '\t') {
		b = b[1:]
	}
	return b
}

// SigningKeyFromSeed makes the signing key of a 32-byte seed
// (ed25519.SeedSize): the same seed gives the same key. It is for tests
// and test pools, whose nodes agree on a key without sharing a file; a
// real authority's key comes from NewSigningKey.
func SigningKeyFromSeed(seed []byte) (*SigningKey, error) {
	if len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("a signing key's seed has %d bytes, not %d", ed25519.SeedSize, len(seed))
	}
	priv := ed25519.NewKeyFromSeed(seed)
	return &SigningKey{id: keyID(priv.Public().(ed25519.PublicKey)), priv: priv}, nil
}
