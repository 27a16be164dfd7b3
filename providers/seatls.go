package providers

import (
	"crypto/tls"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/pond-htc/pond/condor/auth"
)

// SeaTLS is the TLS a provider calls a sea's agents with: the sea's CA
// (auth.FindClientTLS), once there is one. It is looked for again until
// found, since a provider may make the CA during the same apply. The zero
// value is ready to use.
type SeaTLS struct {
	mu  sync.Mutex
	cfg *tls.Config
}

// Config returns the sea's TLS for the working directory workDir, or nil
// (plain HTTP) while there is no CA. A CA that cannot be read gives a
// configuration whose every handshake fails with the reason, before
// anything is sent.
func (s *SeaTLS) Config(workDir string) *tls.Config {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cfg != nil {
		return s.cfg
	}
	cfg, err := auth.FindClientTLS(os.Getenv, workDir)
	if err != nil {
		cfg = auth.RefuseTLS(fmt.Errorf("the sea's CA: %w", err))
	}
	s.cfg = cfg
	return cfg
}

// OpenAuthority opens the authority of the sea the working directory
// workDir manages (its .pond/auth unless POND_AUTHORITY names another),
// making .pond private to its owner and the authority the first time.
func OpenAuthority(workDir string) (*auth.Authority, error) {
	if err := PrivateDir(filepath.Join(workDir, ".pond")); err != nil {
		return nil, fmt.Errorf("authority: %w", err)
	}
	return auth.OpenAuthority(auth.FindAuthorityDir(os.Getenv, workDir))
}
