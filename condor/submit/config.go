package submit

import (
	"strings"

	"github.com/pond-htc/pond/condor/config"
)

// ApplyConfig fills the options condor_submit takes from the HTCondor
// configuration when they are not set: UID_DOMAIN, FILESYSTEM_DOMAIN,
// ARCH, OPSYS and JOB_DEFAULT_REQUESTCPUS/MEMORY/DISK.
func (o *Options) ApplyConfig(c *config.Config) {
	get := func(name string) string {
		v, _ := c.Get(name)
		return strings.TrimSpace(v)
	}
	fill := func(dst *string, name string) {
		if *dst == "" {
			*dst = get(name)
		}
	}
	fill(&o.UIDDomain, "UID_DOMAIN")
	fill(&o.FileSystemDomain, "FILESYSTEM_DOMAIN")
	fill(&o.Arch, "ARCH")
	fill(&o.OpSys, "OPSYS")
	fill(&o.DefaultRequestCpus, "JOB_DEFAULT_REQUESTCPUS")
	fill(&o.DefaultRequestMemory, "JOB_DEFAULT_REQUESTMEMORY")
	fill(&o.DefaultRequestDisk, "JOB_DEFAULT_REQUESTDISK")
}
