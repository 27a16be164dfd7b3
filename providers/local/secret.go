package local

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/pond-htc/pond/condor/wire"
)

// poolSecret returns the path of the working directory's pool secret,
// creating the secret the first time: 32 random bytes, hex-encoded, in a
// file only its owner can read (mode 0600). Every node the provider
// launches names it in SEC_POOL_PASSWORD_FILE, so that the daemons of this
// directory's pools accept claims, updates and submits from one another
// only, and the condor tools run in the directory find it.
func (p *Provider) poolSecret() (string, error) {
	p.secretMu.Lock()
	defer p.secretMu.Unlock()
	path := filepath.Join(p.workDir, filepath.FromSlash(wire.SecretFile))
	if err := privateDir(filepath.Dir(path)); err != nil {
		return "", fmt.Errorf("pool secret: %w", err)
	}
	buf := make([]byte, 32)
	if _, err := rand.Read(buf); err != nil {
		return "", fmt.Errorf("pool secret: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	switch {
	case errors.Is(err, fs.ErrExist):
		return path, checkSecret(path)
	case err != nil:
		return "", fmt.Errorf("pool secret: %w", err)
	}
	_, err = f.WriteString(hex.EncodeToString(buf) + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return "", fmt.Errorf("pool secret: writing %s: %w", path, err)
	}
	return path, nil
}

// checkSecret makes sure an existing secret file is usable and private.
func checkSecret(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("pool secret: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("pool secret: %s is not a regular file", path)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("pool secret: %s is readable by others (mode %04o): make it private with chmod 600", path, fi.Mode().Perm())
	}
	_, err = wire.ReadSecretFile(path)
	return err
}
