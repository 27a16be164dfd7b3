package glidein

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/providers/providertest"
	"github.com/zclconf/go-cty/cty"
)

func TestSettings(t *testing.T) {
	sc, err := providertest.Object(slurmProviderSchema(), map[string]cty.Value{
		"partition": cty.StringVal("debug"), "account": cty.StringVal("phys"), "qos": cty.StringVal("low"),
		"time_limit": cty.StringVal("90m"), "constraints": cty.StringVal("avx2"),
		"extra_sbatch": cty.ListVal([]cty.Value{cty.StringVal("--exclusive")}), "work_dir": cty.StringVal("/scratch"),
		"commands": cty.MapVal(map[string]cty.Value{"sbatch": cty.StringVal("/opt/bin/sbatch")}),
	})
	if err != nil {
		t.Fatal(err)
	}
	s, err := SlurmSettingsOf(sc)
	if err != nil {
		t.Fatal(err)
	}
	if s.Partition != "debug" || s.Account != "phys" || s.QOS != "low" || s.TimeLimit != 90*time.Minute || s.Constraints != "avx2" ||
		!slices.Equal(s.ExtraSbatch, []string{"--exclusive"}) || s.WorkDir != "/scratch" || s.Commands["sbatch"] != "/opt/bin/sbatch" {
		t.Errorf("slurm settings %+v", s)
	}
	bad, _ := providertest.Object(slurmProviderSchema(), map[string]cty.Value{"commands": cty.MapVal(map[string]cty.Value{"srun": cty.StringVal("x")})})
	if _, err := SlurmSettingsOf(bad); err == nil || !strings.Contains(err.Error(), `"srun" is not a Slurm command`) {
		t.Errorf("commands with srun: %v", err)
	}
	bad, _ = providertest.Object(slurmProviderSchema(), map[string]cty.Value{"time_limit": cty.StringVal("forever")})
	if _, err := SlurmSettingsOf(bad); err == nil || !strings.Contains(err.Error(), "time_limit") {
		t.Errorf("time_limit forever: %v", err)
	}

	hc, _ := providertest.Object(sshProviderSchema(), map[string]cty.Value{
		"hosts": cty.ListVal([]cty.Value{cty.StringVal("a"), cty.StringVal("b:2222")}), "user": cty.StringVal("pond"),
		"private_key_file": cty.StringVal("/k"), "known_hosts_file": cty.StringVal("/kh"), "remote_dir": cty.StringVal("/tmp/g"),
		"slots_per_host": cty.NumberIntVal(2),
	})
	h, err := SSHSettingsOf(hc)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(h.Hosts, []string{"a", "b:2222"}) || h.User != "pond" || h.PrivateKeyFile != "/k" || h.KnownHostsFile != "/kh" ||
		h.RemoteDir != "/tmp/g" || h.SlotsPerHost != 2 {
		t.Errorf("ssh settings %+v", h)
	}
	empty, _ := providertest.Object(sshProviderSchema(), map[string]cty.Value{"hosts": cty.ListValEmpty(cty.String)})
	if _, err := SSHSettingsOf(empty); err == nil || !strings.Contains(err.Error(), "at least one host") {
		t.Errorf("no hosts: %v", err)
	}
}
