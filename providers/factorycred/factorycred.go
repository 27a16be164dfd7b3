// Package factorycred makes, keeps and hands over the credentials of a
// pool's pilot factory: a signing key the working directory's authority
// delegates, limited to the node tokens of the pool's glideins, and, in a
// sea that speaks TLS, an intermediate CA limited to their names. The
// local provider gives them to a central manager it starts
// (-factory-key, -factory-ca); the glidein providers give them to one
// already running (Ensure) when a factory block names its pool.
package factorycred

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/providers"
)

// What the central manager of a pool whose pilot factory has entries (a
// glidein resource with a factory block joins the pool: the planner's
// providers.ConfigureRequest.FactoryPools) is given, as `pondctl cert
// factory` would make it: a signing key the authority delegates, limited
// to node tokens of the pool's glideins (node/pond-POOL-*, DAEMON and
// SEA_READ, at most tokenLifetime), and, in a sea that speaks TLS,
// an intermediate CA limited to their names, both in a directory of the
// pool's own (.pond/local/factory/POOL, 0700; the files 0600), given to
// the agent with -factory-key and -factory-ca. They are made once and kept
// across launches and pools destroyed and made again (a new delegated key
// would add one more to the trusted keys each time); the CA is made again
// when it has less than a week left (CARenewWithin): only the working
// directory's authority can make it, so an apply renews it, within the
// agents' first alarm (POND_CREDENTIAL_ALARMS).
const (
	// KeyFile and CAFile are their names in the pool's factory
	// directory (Dir).
	KeyFile = "factory.key"
	CAFile  = "factory-ca.pem"

	tokenLifetime = 5 * time.Hour
	caLifetime    = 30 * 24 * time.Hour
	caRenew       = CARenewWithin
)

// CARenewWithin is how long before its expiry the factory's delegated CA
// is made again and given to the running factory (Files, Ensure).
const CARenewWithin = 7 * 24 * time.Hour

// CADue reports whether the delegated CA kept in dir (Dir) is due for
// renewal at now: less than CARenewWithin left, or unreadable. A pool
// without one (no factory, or a sea without TLS) is not.
func CADue(dir string, now time.Time) bool {
	path := filepath.Join(dir, CAFile)
	if _, err := os.Stat(path); err != nil {
		return false
	}
	sub, err := auth.ReadSubCA(path)
	return err != nil || sub.Cert.NotAfter.Sub(now) < CARenewWithin
}

// Dir is the directory of the delegated key and CA of pool's factory in
// the working directory workDir.
func Dir(workDir, pool string) string {
	return filepath.Join(workDir, ".pond", "local", "factory", pool)
}

// Files makes, or finds, the delegated key and CA of pool's
// factory in dir and returns their paths; caPath is "" in a sea without
// TLS.
func Files(a *auth.Authority, dir, pool string) (keyPath, caPath string, err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return "", "", err
	}
	prefix := api.FactoryPrefix(pool)
	keyPath = filepath.Join(dir, KeyFile)
	if !delegatedKeyTrusted(a, keyPath) {
		k, err := a.Delegate(auth.KeyLimits{Name: "factory " + pool, SubjectPrefix: "node/" + prefix,
			Scopes: []auth.Scope{auth.Daemon, auth.SeaRead}, MaxLifetime: tokenLifetime})
		if err != nil {
			return "", "", fmt.Errorf("delegating the factory's key: %w", err)
		}
		if err := auth.WriteSigningKey(keyPath, k); err != nil {
			return "", "", fmt.Errorf("the factory's key: %w", err)
		}
	}
	if _, err := os.Stat(a.CAFile()); errors.Is(err, os.ErrNotExist) {
		return keyPath, "", nil // a sea without TLS
	}
	caPath = filepath.Join(dir, CAFile)
	if sub, err := auth.ReadSubCA(caPath); err != nil || sub.Prefix != prefix || time.Until(sub.Cert.NotAfter) < caRenew {
		data, err := a.DelegateCA(prefix, caLifetime)
		if err != nil {
			return "", "", fmt.Errorf("delegating the factory's CA: %w", err)
		}
		if err := writePrivate(caPath, string(data)); err != nil {
			return "", "", fmt.Errorf("the factory's CA: %w", err)
		}
	}
	return keyPath, caPath, nil
}

// Ensure gives the running central manager's agent
// that c talks to (with an administrator's token) the delegated key and
// CA of pool's factory, made or found as at a launch (in
// WORKDIR/.pond/local/factory/POOL), when it lacks them, holds others,
// or holds a CA with less than a day left: a pool whose central manager
// was started before a glidein's factory block named it gets them with
// no restart. It reports whether it sent them.
func Ensure(ctx context.Context, workDir, pool string, c *api.Client) (bool, error) {
	st, err := c.Factory(ctx)
	if err != nil {
		return false, fmt.Errorf("the pilot factory of pool %s: %w", pool, err)
	}
	if !st.NeedsCredentials {
		return false, nil // a sea that requires no tokens
	}
	a, err := providers.OpenAuthority(workDir)
	if err != nil {
		return false, err
	}
	keyPath, caPath, err := Files(a, Dir(workDir, pool), pool)
	if err != nil {
		return false, fmt.Errorf("the credentials of pool %s's factory: %w", pool, err)
	}
	k, err := auth.ReadSigningKey(keyPath)
	if err != nil {
		return false, err
	}
	if held := st.Credentials; held != nil && held.KeyID == k.ID() &&
		(caPath == "" || time.Until(held.CAExpires) >= caRenew) {
		return false, nil
	}
	var creds api.FactoryCredentials
	key, err := os.ReadFile(keyPath)
	if err != nil {
		return false, err
	}
	creds.Key = string(key)
	if caPath != "" {
		ca, err := os.ReadFile(caPath)
		if err != nil {
			return false, err
		}
		creds.CA = string(ca)
	}
	if _, err := c.SetFactoryCredentials(ctx, creds); err != nil {
		return false, fmt.Errorf("giving pool %s's factory its credentials: %w", pool, err)
	}
	return true, nil
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

// writePrivate writes data to path (0600) through a rename.
func writePrivate(path, data string) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(data), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
