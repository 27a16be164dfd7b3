package local

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/pond-htc/pond/providers/factorycred"
)

// factoryDir is the directory of the delegated key and CA of pool's
// factory (factorycred.Dir of the working directory).
func (p *Provider) factoryDir(pool string) string { return filepath.Join(p.root, "factory", pool) }

// factoryArgs makes, or finds, the delegated key and CA of pool's factory
// and returns the agent's flags that name them.
func (p *Provider) factoryArgs(pool string) ([]string, error) {
	a, err := p.authority()
	if err != nil {
		return nil, err
	}
	keyPath, caPath, err := factorycred.Files(a, p.factoryDir(pool), pool)
	if err != nil {
		return nil, err
	}
	args := []string{"-factory-key", keyPath}
	if caPath != "" {
		args = append(args, "-factory-ca", caPath)
	}
	return args, nil
}

// renewFactoryCA gives the running pilot factory of pool, on the central
// manager whose API is at cm, a new delegated CA when the one kept is due
// (factorycred.CADue): the factory cannot make one itself, since that
// takes the authority's root key. Glideins already running keep their
// certificates until their own expiry.
func (p *Provider) renewFactoryCA(ctx context.Context, pool, cm string, progress func(string)) error {
	if !factorycred.CADue(p.factoryDir(pool), p.now()) {
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	sent, err := factorycred.Ensure(cctx, p.workDir, pool, p.client(cm))
	if err != nil {
		return fmt.Errorf("renewing the delegated CA of pool %s's pilot factory: %w", pool, err)
	}
	if sent {
		progress(fmt.Sprintf("the pilot factory of pool %s given a new delegated CA", pool))
	}
	return nil
}
