package local

import (
	"path/filepath"

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
