package cli

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	site "github.com/pond-htc/pond/overlay/glidein"
	"github.com/pond-htc/pond/overlay/glidein/slurm"
	"github.com/pond-htc/pond/overlay/glidein/ssh"
	"github.com/pond-htc/pond/planner/config"
	"github.com/pond-htc/pond/providers/glidein"
)

// glideinSites returns the constructors of the sites of the glidein
// providers, by provider kind: a provider "slurm" block makes a Slurm
// site (overlay/glidein/slurm), a provider "ssh" block an SSH site
// (overlay/glidein/ssh). The sites are wired here, and only here.
func glideinSites() map[string]glidein.SiteFunc {
	return map[string]glidein.SiteFunc{
		glidein.KindSlurm: slurmSite,
		glidein.KindSSH:   sshSite,
	}
}

// slurmSite makes the Slurm site of a provider "slurm" block.
func slurmSite(c cty.Value) (site.Site, error) {
	s, err := glidein.SlurmSettingsOf(c)
	if err != nil {
		return nil, err
	}
	cmd := s.Commands
	sl, err := slurm.New(slurm.Config{
		WorkDir:    s.WorkDir,
		Partition:  s.Partition,
		Account:    s.Account,
		QOS:        s.QOS,
		Constraint: s.Constraints,
		TimeLimit:  s.TimeLimit,
		Extra:      s.ExtraSbatch,
		Commands: slurm.Commands{
			Sbatch: cmd["sbatch"], Squeue: cmd["squeue"], Sacct: cmd["sacct"],
			Scancel: cmd["scancel"], Scontrol: cmd["scontrol"], Sacctmgr: cmd["sacctmgr"],
		},
	})
	if err != nil {
		// Not sl: a nil *slurm.Site in a Site is not a nil Site.
		return nil, err
	}
	return sl, nil
}

// sshSite makes the SSH site of a provider "ssh" block. Its known_hosts
// file is ~/.ssh/known_hosts unless the block names one.
func sshSite(c cty.Value) (site.Site, error) {
	s, err := glidein.SSHSettingsOf(c)
	if err != nil {
		return nil, err
	}
	known := s.KnownHostsFile
	if known == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return nil, err
		}
		known = filepath.Join(home, ".ssh", "known_hosts")
	}
	key, err := expandHome(s.PrivateKeyFile)
	if err != nil {
		return nil, err
	}
	if known, err = expandHome(known); err != nil {
		return nil, err
	}
	st, err := ssh.New(ssh.Config{
		Hosts:      s.Hosts,
		User:       s.User,
		KeyFile:    key,
		KnownHosts: known,
		BaseDir:    s.RemoteDir,
		Slots:      s.SlotsPerHost,
		Binary:     binaryOf(c),
	})
	if err != nil {
		// Not st: a nil *ssh.Site in a Site is not a nil Site.
		return nil, err
	}
	return st, nil
}

// binaryOf is the provider block's binary, the one the site checks the
// hosts' architecture against: its binary attribute, else $POND_BIN, else
// this executable (empty: the site's own default, this program's).
func binaryOf(c cty.Value) string {
	if c.Type().IsObjectType() && c.Type().HasAttribute("binary") {
		if v := c.GetAttr("binary"); !v.IsNull() && v.IsKnown() {
			return v.AsString()
		}
	}
	return os.Getenv("POND_BIN")
}

// expandHome replaces a leading ~/ in path with the home directory.
func expandHome(path string) (string, error) {
	rest, ok := strings.CutPrefix(path, "~/")
	if !ok {
		return path, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(home, rest), nil
}

// factoryPools names the pools whose central manager's pilot factory a
// glidein resource of cfg gives an entry to: those with a factory block
// whose pool argument refers to pool.NAME (pool.NAME.central_manager).
// The local provider gives those central managers the factory's delegated
// key and CA when it starts them.
func factoryPools(cfg *config.Config) []string {
	if cfg == nil {
		return nil
	}
	set := map[string]bool{}
	for _, r := range cfg.Resources {
		if r.Mode != config.ManagedResource || r.Type != glidein.ResourceType || r.Config == nil {
			continue
		}
		content, _, _ := r.Config.PartialContent(&hcl.BodySchema{
			Attributes: []hcl.AttributeSchema{{Name: "pool"}},
			Blocks:     []hcl.BlockHeaderSchema{{Type: "factory"}},
		})
		a := content.Attributes["pool"]
		if len(content.Blocks) == 0 || a == nil {
			continue
		}
		for _, tr := range a.Expr.Variables() {
			if tr.RootName() != "pool" || len(tr) < 2 {
				continue
			}
			if step, ok := tr[1].(hcl.TraverseAttr); ok {
				set[step.Name] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(set))
}
