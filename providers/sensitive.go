package providers

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"
)

// HashKeyFile is where a working directory keeps the key of its hashes of
// sensitive values, relative to the working directory.
const HashKeyFile = ".pond/hash.key"

// HashPrefix starts every hash that Hash returns, naming its algorithm.
const HashPrefix = "hmac-sha256:"

// HashKey returns the working directory's key for hashes of sensitive
// values, creating it the first time: 32 random bytes in
// WORKDIR/.pond/hash.key (mode 0600, in a directory of mode 0700). The
// state, saved plans and the local provider's journal keep such a hash
// instead of a sensitive value, so that a change of the value is seen
// without the value being written; the key makes a guess of a short secret
// impossible to check without the working directory.
func HashKey(workDir string) ([]byte, error) {
	path := filepath.Join(workDir, filepath.FromSlash(HashKeyFile))
	if err := PrivateDir(filepath.Dir(path)); err != nil {
		return nil, fmt.Errorf("hash key: %w", err)
	}
	key, err := readHashKey(path)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return key, err
	}
	buf := make([]byte, 32)
	if _, err := rand.Read(buf); err != nil {
		return nil, fmt.Errorf("hash key: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		// Made by another process meanwhile.
		return readHashKey(path)
	}
	if err != nil {
		return nil, fmt.Errorf("hash key: %w", err)
	}
	_, err = f.WriteString(hex.EncodeToString(buf) + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return nil, fmt.Errorf("hash key: writing %s: %w", path, err)
	}
	return buf, nil
}

func readHashKey(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("hash key: %s is not a regular file", path)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("hash key: %s is readable by others (mode %04o): make it private with chmod 600", path, fi.Mode().Perm())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("hash key: %w", err)
	}
	key, err := hex.DecodeString(strings.TrimSpace(string(data)))
	if err != nil || len(key) < 16 {
		return nil, fmt.Errorf("hash key: %s does not hold a key (remove it to make a new one; sensitive values then show as changed once)", path)
	}
	return key, nil
}

// Hash returns the keyed hash of the sensitive value v found at path (see
// FormatPath): HashPrefix and the hex HMAC-SHA256, under key, of the path
// and the value's JSON. Equal values at one path have equal hashes; the
// path is part of it so that two equal secrets do not show as equal.
func Hash(key []byte, path string, v cty.Value) (string, error) {
	v, _ = v.UnmarkDeep()
	data, err := ctyjson.Marshal(v, v.Type())
	if err != nil {
		return "", err
	}
	ty, err := ctyjson.MarshalType(v.Type())
	if err != nil {
		return "", err
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(path))
	m.Write([]byte{0})
	m.Write(ty)
	m.Write([]byte{0})
	m.Write(data)
	return HashPrefix + hex.EncodeToString(m.Sum(nil)), nil
}

// FormatPath writes a path as it reads in configuration: config["SECRET"],
// node_details[0].name.
func FormatPath(p cty.Path) string {
	var b strings.Builder
	for _, s := range p {
		switch s := s.(type) {
		case cty.GetAttrStep:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(s.Name)
		case cty.IndexStep:
			k, _ := s.Key.Unmark()
			switch {
			case !k.IsKnown() || k.IsNull():
				b.WriteString("[?]")
			case k.Type() == cty.String:
				b.WriteString("[" + strconv.Quote(k.AsString()) + "]")
			case k.Type() == cty.Number:
				b.WriteString("[" + k.AsBigFloat().Text('f', -1) + "]")
			default:
				b.WriteString("[?]")
			}
		}
	}
	return b.String()
}

// PrivateDir creates dir (such as a working directory's .pond) if need be
// and makes it private to its owner, mode 0700, even if it existed: the
// keys, state of the nodes and their secrets live in it.
func PrivateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	if fi.Mode().Perm() != 0o700 {
		return os.Chmod(dir, 0o700)
	}
	return nil
}
