package providers

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/atomicfile"
)

// SeaKeyFile is the name of a working directory's sea key in the directory
// of its authority (.pond/auth, or POND_AUTHORITY): the gossip encryption
// key of the agents its providers start without an encrypt of their own.
const SeaKeyFile = "gossip.key"

// SeaKeyPath is where the sea key of the working directory workDir is.
func SeaKeyPath(workDir string) string {
	return filepath.Join(auth.FindAuthorityDir(os.Getenv, workDir), SeaKeyFile)
}

// SeaKey returns the sea key of the working directory workDir (see
// SeaKeyPath), base64 as `pondctl sea keygen` prints it, making it with
// the same generator the first time: mode 0600, in a directory of mode
// 0700, written whole or not at all. Providers that need it at the same
// moment, in one process or several, get the same key.
func SeaKey(workDir string) (string, error) {
	path := SeaKeyPath(workDir)
	key, err := ReadSeaKey(workDir)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return key, err
	}
	if filepath.Dir(path) == filepath.Join(workDir, filepath.FromSlash(auth.AuthorityDir)) {
		if err := PrivateDir(filepath.Join(workDir, ".pond")); err != nil {
			return "", fmt.Errorf("the sea key: %w", err)
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", fmt.Errorf("the sea key: %w", err)
	}
	key, err = api.GossipKeyGen()
	if err != nil {
		return "", fmt.Errorf("the sea key: %w", err)
	}
	if _, err := atomicfile.Create(path, []byte(key+"\n")); err != nil {
		return "", fmt.Errorf("the sea key: writing %s: %w", path, err)
	}
	// Made by this call, or by another one meanwhile: the file is the key.
	return ReadSeaKey(workDir)
}

// ReadSeaKey returns the sea key of the working directory workDir, an
// error that wraps fs.ErrNotExist when it has none, and an error naming
// the file when it cannot be used: not a regular file, readable by others
// than its owner, or not a key.
func ReadSeaKey(workDir string) (string, error) {
	path := SeaKeyPath(workDir)
	fi, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("the sea key: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("the sea key: %s is not a regular file", path)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("the sea key: %s has mode %04o: others than its owner may read it; make it 0600 (chmod 600), or make a new key if others did read it", path, fi.Mode().Perm())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("the sea key: %w", err)
	}
	key := strings.TrimSpace(string(data))
	if _, err := api.ParseGossipKey(key); err != nil {
		return "", fmt.Errorf("the sea key: %s: %w", path, err)
	}
	return key, nil
}
