package glidein

import (
	"fmt"
	"time"

	"github.com/zclconf/go-cty/cty"
)

// SlurmSettings is a provider "slurm" block, for the SiteFunc that makes
// its site.
type SlurmSettings struct {
	Partition   string
	Account     string
	QOS         string
	TimeLimit   time.Duration // 0: the glidein's lifetime plus a margin
	Constraints string
	ExtraSbatch []string
	WorkDir     string
	// Commands maps sbatch, squeue, sacct, scancel, scontrol and
	// sacctmgr to their paths.
	Commands map[string]string
}

// SlurmSettingsOf reads a provider "slurm" block.
func SlurmSettingsOf(c cty.Value) (SlurmSettings, error) {
	s := SlurmSettings{
		Partition:   getString(c, "partition"),
		Account:     getString(c, "account"),
		QOS:         getString(c, "qos"),
		Constraints: getString(c, "constraints"),
		WorkDir:     getString(c, "work_dir"),
		ExtraSbatch: stringList(getAttr(c, "extra_sbatch")),
		Commands:    map[string]string{},
	}
	var err error
	if s.TimeLimit, err = durationAttr(c, "time_limit", 0, time.Minute); err != nil {
		return s, err
	}
	if m := getAttr(c, "commands"); !m.IsNull() && m.IsWhollyKnown() {
		for k, v := range m.AsValueMap() {
			switch k {
			case "sbatch", "squeue", "sacct", "scancel", "scontrol", "sacctmgr":
			default:
				return s, attrErr("commands", "%q is not a Slurm command pond uses (sbatch, squeue, sacct, scancel, scontrol, sacctmgr)", k)
			}
			if !v.IsNull() {
				s.Commands[k] = v.AsString()
			}
		}
	}
	return s, nil
}

// SSHSettings is a provider "ssh" block, for the SiteFunc that makes its
// site.
type SSHSettings struct {
	Hosts          []string
	User           string
	PrivateKeyFile string
	KnownHostsFile string
	RemoteDir      string
	SlotsPerHost   int
}

// SSHSettingsOf reads a provider "ssh" block.
func SSHSettingsOf(c cty.Value) (SSHSettings, error) {
	s := SSHSettings{
		Hosts:          stringList(getAttr(c, "hosts")),
		User:           getString(c, "user"),
		PrivateKeyFile: getString(c, "private_key_file"),
		KnownHostsFile: getString(c, "known_hosts_file"),
		RemoteDir:      getString(c, "remote_dir"),
	}
	var err error
	if s.SlotsPerHost, err = intAttr(c, "slots_per_host", 1, 1, maxSlots); err != nil {
		return s, err
	}
	if len(s.Hosts) == 0 {
		return s, fmt.Errorf("hosts: want at least one host")
	}
	return s, nil
}

func stringList(v cty.Value) []string {
	if v.IsNull() || !v.IsWhollyKnown() {
		return nil
	}
	var out []string
	for _, e := range v.AsValueSlice() {
		if !e.IsNull() {
			out = append(out, e.AsString())
		}
	}
	return out
}
