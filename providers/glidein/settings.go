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

// AWSSettings is a provider "aws" block, for the SiteFunc that makes its
// site (overlay/glidein/ec2).
type AWSSettings struct {
	Region, Profile, Endpoint string
	AMI                       string
	InstanceTypes             []string
	Subnets                   []string
	SecurityGroups            []string
	IAMInstanceProfile        string
	KeyName                   string
	Tags                      map[string]string
	Spot                      bool
	AgentBinary               string
	BaseDir                   string
	ParameterPrefix           string
	KMSKeyID                  string
	// Prices, LaunchTemplate and BlockDevices: see awslaunch.go.
	Prices         map[string]float64
	LaunchTemplate *AWSLaunchTemplate
	BlockDevices   []AWSBlockDevice
}

// AWSSettingsOf reads a provider "aws" block.
func AWSSettingsOf(c cty.Value) (AWSSettings, error) {
	s := AWSSettings{
		Region:             getString(c, "region"),
		Profile:            getString(c, "profile"),
		Endpoint:           getString(c, "endpoint"),
		AMI:                getString(c, "ami"),
		InstanceTypes:      stringList(getAttr(c, "instance_types")),
		Subnets:            stringList(getAttr(c, "subnets")),
		SecurityGroups:     stringList(getAttr(c, "security_groups")),
		IAMInstanceProfile: getString(c, "iam_instance_profile"),
		KeyName:            getString(c, "key_name"),
		AgentBinary:        getString(c, "agent_binary"),
		BaseDir:            getString(c, "base_dir"),
		ParameterPrefix:    getString(c, "parameter_prefix"),
		KMSKeyID:           getString(c, "kms_key_id"),
		Tags:               map[string]string{},
	}
	if v := getAttr(c, "spot"); !v.IsNull() && v.IsKnown() && v.Type() == cty.Bool {
		s.Spot = v.True()
	}
	if m := getAttr(c, "tags"); !m.IsNull() && m.IsWhollyKnown() {
		for k, v := range m.AsValueMap() {
			if !v.IsNull() {
				s.Tags[k] = v.AsString()
			}
		}
	}
	if len(s.InstanceTypes) == 0 {
		return s, fmt.Errorf("instance_types: want at least one instance type")
	}
	if err := launchSettingsOf(c, &s); err != nil {
		return s, err
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
