package cli

import (
	"github.com/pond-htc/pond/providers/glidein"
)

// glideinSites returns the constructors of the sites of the glidein
// providers, by provider kind. A kind without one gives a provider that
// validates configurations but refuses to plan, saying that this pondctl
// is built without that kind of site.
//
// The sites are wired here, and only here:
//
//	glidein.KindSlurm: func(c cty.Value) (site.Site, error) {
//		s, err := glidein.SlurmSettingsOf(c)
//		if err != nil {
//			return nil, err
//		}
//		return slurm.New(slurm.Config{Partition: s.Partition, ...})
//	},
//	glidein.KindSSH: func(c cty.Value) (site.Site, error) {
//		s, err := glidein.SSHSettingsOf(c)
//		...
//		return ssh.New(ssh.Config{Hosts: s.Hosts, ...})
//	},
//
// with site "github.com/pond-htc/pond/overlay/glidein" and the packages
// overlay/glidein/slurm and overlay/glidein/ssh.
func glideinSites() map[string]glidein.SiteFunc {
	return map[string]glidein.SiteFunc{}
}
