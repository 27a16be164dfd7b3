package local

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/overlay/factory"
)

// What the central manager of a pool whose pilot factory has entries (a
// glidein resource with a factory block joins the pool: the planner's
// providers.ConfigureRequest.FactoryPools) is given, as `pondctl cert
// factory` would make it: a signing key the authority delegates, limited
// to node tokens of the pool's glideins (node/pond-POOL-*, DAEMON and
// SEA_READ, at most factoryTokenLifetime), and, in a sea that speaks TLS,
// an intermediate CA limited to their names, both in a directory of the
// pool's own (.pond/local/factory/POOL, 0700; the files 0600), given to
// the agent with -factory-key and -factory-ca. They are made once and kept
// across launches and pools destroyed and made again (a new delegated key
// would add one more to the trusted keys each time); the CA is made again
// when it has less than a day left.
const (
	// FactoryKeyFile and FactoryCAFile are their names in the pool's
	// factory directory (factoryDir).
	FactoryKeyFile = "factory.key"
	FactoryCAFile  = "factory-ca.pem"

	factoryTokenLifetime = 5 * time.Hour
	factoryCALifetime    = 30 * 24 * time.Hour
	factoryCARenew       = 24 * time.Hour
)

// factoryDir is the directory of the delegated key and CA of pool's
// factory.
func (p *Provider) factoryDir(pool string) string { return filepath.Join(p.root, "factory", pool) }

// factoryArgs makes, or finds, the delegated key and CA of pool's factory
// and returns the agent's flags that name them.
func (p *Provider) factoryArgs(pool string) ([]string, error) {
	a, err := p.authority()
	if err != nil {
		return nil, err
	}
	dir := p.factoryDir(pool)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, err
	}
	prefix := factory.Prefix(pool)
	keyPath := filepath.Join(dir, FactoryKeyFile)
	if !delegatedKeyTrusted(a, keyPath) {
		k, err := a.Delegate(auth.KeyLimits{Name: "factory " + pool, SubjectPrefix: "node/" + prefix,
			Scopes: []auth.Scope{auth.Daemon, auth.SeaRead}, MaxLifetime: factoryTokenLifetime})
		if err != nil {
			return nil, fmt.Errorf("delegating the factory's key: %w", err)
		}
		if err := auth.WriteSigningKey(keyPath, k); err != nil {
			return nil, fmt.Errorf("the factory's key: %w", err)
		}
	}
	args := []string{"-factory-key", keyPath}
	if _, err := os.Stat(a.CAFile()); errors.Is(err, os.ErrNotExist) {
		return args, nil // a sea without TLS
	}
	caPath := filepath.Join(dir, FactoryCAFile)
	if sub, err := auth.ReadSubCA(caPath); err != nil || sub.Prefix != prefix || time.Until(sub.Cert.NotAfter) < factoryCARenew {
		data, err := a.DelegateCA(prefix, factoryCALifetime)
		if err != nil {
			return nil, fmt.Errorf("delegating the factory's CA: %w", err)
		}
		if err := writePrivate(caPath, string(data)); err != nil {
			return nil, fmt.Errorf("the factory's CA: %w", err)
		}
	}
	return append(args, "-factory-ca", caPath), nil
}

// delegatedKeyTrusted reports whether the key at path is one the
// authority delegated and still trusts.
func delegatedKeyTrusted(a *auth.Authority, path string) bool {
	k, err := auth.ReadSigningKey(path)
	if err != nil {
		return false
	}
	_, delegated, err := auth.ReadTrustedKeys(filepath.Join(a.Dir(), auth.TrustedKeysFile))
	if err != nil {
		return false
	}
	for _, d := range delegated {
		if d.Key.Equal(k.Public()) {
			return true
		}
	}
	return false
}
