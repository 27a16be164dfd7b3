package kinds

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pond-htc/pond/overlay/glidein"
	"github.com/pond-htc/pond/overlay/glidein/ssh/sshtest"
)

// TestNew: each kind builds its site from its provider block's settings,
// and settings the site refuses are an error with no site, never a nil
// site inside a non-nil interface, a *glidein.SettingError naming the
// argument when it is about one; the SSH site is closed through
// io.Closer.
func TestNew(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	known, key := filepath.Join(dir, "known_hosts"), filepath.Join(dir, "id")
	if err := os.WriteFile(known, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	sshtest.GenerateKey(t, key)
	js := func(v any) json.RawMessage {
		data, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	ssh := func(known, key string) json.RawMessage {
		return js(map[string]any{"hosts": []string{"127.0.0.2:22"}, "known_hosts_file": known, "private_key_file": key, "slots_per_host": 2})
	}
	aws := func(more map[string]any) json.RawMessage {
		m := map[string]any{"region": "us-east-1", "endpoint": "http://127.0.0.1:1", "ami": "ami-12345678", "instance_types": []string{"t3.micro"}}
		for k, v := range more {
			m[k] = v
		}
		return js(m)
	}
	for _, tc := range []struct {
		kind     string
		settings json.RawMessage
		want     string // the error, or "" for a site of kind
		setting  string // the SettingError's setting, when want is one
	}{
		{"slurm", js(map[string]any{"work_dir": dir, "partition": "debug", "time_limit": "2h", "commands": map[string]string{"sbatch": "/opt/slurm/bin/sbatch"}}), "", ""},
		{"slurm", js(map[string]any{"work_dir": "relative/dir"}), "work_dir \"relative/dir\" must be an absolute path", ""},
		{"slurm", js(map[string]any{"work_dir": dir, "partition": "a b"}), "is not a partition name", ""},
		{"slurm", js(map[string]any{"work_dir": dir, "time_limit": "30s"}), "time_limit: \"30s\" is less than 1m0s", "time_limit"},
		{"slurm", js(map[string]any{"work_dir": dir, "commands": map[string]string{"srun": "/bin/srun"}}), `"srun" is not a Slurm command`, "commands"},
		{"slurm", js(map[string]any{"work_dir": dir, "nodes": 3}), `unknown field "nodes"`, ""},
		{"slurm", js(map[string]any{"work_dir": dir, "login": map[string]any{"host": "login1", "port": 2222, "user": "pond", "private_key_file": key, "known_hosts_file": known, "jump_host": "ops@bastion:22"}}), "", ""},
		{"slurm", js(map[string]any{"work_dir": dir, "login": map[string]any{"host": "", "known_hosts_file": known}}), "login.host: the login node's name or address is required", "login"},
		{"slurm", js(map[string]any{"work_dir": dir, "login": map[string]any{"host": "login1", "port": 70000, "private_key_file": key, "known_hosts_file": known}}), "login.port: 70000 is not a port number", "login"},
		{"slurm", js(map[string]any{"work_dir": dir, "login": map[string]any{"host": "login1", "private_key_file": key, "known_hosts_file": filepath.Join(dir, "none")}}), "known_hosts_file", ""},
		{"slurm", js(map[string]any{"work_dir": dir, "login": map[string]any{"host": "login1", "private_key_file": key, "known_hosts_file": known, "jump_host": "a@b@c"}}), "jump_host", ""},
		{"slurm", js(map[string]any{"work_dir": dir, "login": map[string]any{"host": "login;rm", "private_key_file": key, "known_hosts_file": known}}), "not a host name", ""},
		{"gridengine", js(map[string]any{"work_dir": dir, "queue": "all.q", "parallel_environment": "smp", "cpus": 4, "walltime": "2h",
			"env": map[string]string{"SGE_ROOT": "/opt/sge"}, "commands": map[string]string{"qsub": "/opt/sge/bin/qsub"}}), "", ""},
		{"gridengine", js(map[string]any{"work_dir": "relative/dir"}), "work_dir: \"relative/dir\" must be an absolute path", "work_dir"},
		{"gridengine", js(map[string]any{"work_dir": dir + "/$JOB_ID"}), "may not hold '$'", "work_dir"},
		{"gridengine", js(map[string]any{"work_dir": dir, "queue": "a b"}), "is not a queue name", "queue"},
		{"gridengine", js(map[string]any{"work_dir": dir, "cpus": 4}), "cpus: 4 CPUs need a parallel_environment", "cpus"},
		{"gridengine", js(map[string]any{"work_dir": dir, "cpus": 1.5}), "cpus: 1.5 is not a whole number", "cpus"},
		{"gridengine", js(map[string]any{"work_dir": dir, "walltime": "soon"}), "walltime: \"soon\" is not a duration", "walltime"},
		{"gridengine", js(map[string]any{"work_dir": dir, "extra_qsub": []string{"-l gpu=1", "#$ -N other"}}), "extra_qsub: [1] \"#$ -N other\": -N is set by pond itself", "extra_qsub"},
		{"gridengine", js(map[string]any{"work_dir": dir, "commands": map[string]string{"qrsh": "/bin/qrsh"}}), `"qrsh" is not a Grid Engine command`, "commands"},
		{"gridengine", js(map[string]any{"work_dir": dir, "env": map[string]string{"A B": "x"}}), `env: "A B" is not a variable name`, "env"},
		{"gridengine", js(map[string]any{"work_dir": dir, "login": map[string]any{"host": "login1", "port": 2222, "private_key_file": key, "known_hosts_file": known}}), "", ""},
		{"gridengine", js(map[string]any{"work_dir": dir, "login": map[string]any{"host": "login1", "port": 0, "private_key_file": key, "known_hosts_file": known}}), "login.port: 0 is not a port number", "login"},
		{"ssh", ssh(known, key), "", ""},
		{"ssh", ssh(filepath.Join(dir, "none"), key), "known_hosts", ""},
		{"ssh", ssh(known, filepath.Join(dir, "nokey")), "nokey", ""},
		{"ssh", js(map[string]any{"hosts": []string{}}), "at least one host", "hosts"},
		{"ssh", js(map[string]any{"hosts": []string{"h"}, "slots_per_host": 0}), "slots_per_host: 0 is out of range", "slots_per_host"},
		{"ssh", js(map[string]any{"hosts": []string{"h"}, "slots_per_host": 1.5}), "slots_per_host: 1.5 is not a whole number", "slots_per_host"},
		{"aws", aws(nil), "", ""},
		{"aws", aws(map[string]any{"instance_types": []string{}}), "instance_types: want at least one instance type", "instance_types"},
		{"aws", aws(map[string]any{"prices": map[string]float64{"c7i.large": -1}}), "prices: c7i.large: -1 is negative", "prices"},
		{"aws", aws(map[string]any{"launch_template": map[string]any{}}), "launch_template: want id or name", "launch_template"},
		{"aws", aws(map[string]any{"block_device": []map[string]any{{"device_name": "/dev/xvda", "volume_size": -5}}}),
			"block_device[0].volume_size: -5: want 1 to 65536 GiB", "block_device[0].volume_size"},
		{"aws", aws(map[string]any{"block_device": []map[string]any{{"device_name": "/dev/sdf"}, {"device_name": "/dev/sdf"}}}),
			"block_device[1]: /dev/sdf is mapped twice", "block_device[1].device_name"},
	} {
		k, ok := Registry().Lookup(tc.kind)
		if !ok {
			t.Fatalf("no kind %q", tc.kind)
		}
		s, err := k.New(context.Background(), tc.settings, glidein.KindEnv{})
		if tc.want != "" {
			if err == nil || !strings.Contains(err.Error(), tc.want) || s != nil {
				t.Errorf("%s %s: site %v (nil: %t), error %v; want no site and an error containing %q", tc.kind, tc.settings, s, s == nil, err, tc.want)
			}
			var se *glidein.SettingError
			if tc.setting != "" && (!errors.As(err, &se) || se.Setting != tc.setting) {
				t.Errorf("%s %s: error %v is not about the setting %s", tc.kind, tc.settings, err, tc.setting)
			}
			continue
		}
		if err != nil || s == nil || s.Kind() != tc.kind {
			t.Errorf("%s %s: site %v, error %v", tc.kind, tc.settings, s, err)
			continue
		}
		if c, ok := s.(io.Closer); ok {
			c.Close()
		}
	}
}

// TestEverySettingRead: a kind's New takes every argument and block of
// its provider block, all of them null (as the provider gives a block
// that leaves them out): one it does not know is an error of the kind,
// which would otherwise be shown to a user as one of the block.
func TestEverySettingRead(t *testing.T) {
	reg := Registry()
	if len(reg.Names()) == 0 {
		t.Fatal("no kinds")
	}
	for _, name := range reg.Names() {
		k, _ := reg.Lookup(name)
		all := map[string]any{}
		for n := range k.Provider.Settings {
			all[n] = nil
		}
		for n := range k.Provider.Blocks {
			all[n] = nil
		}
		data, _ := json.Marshal(all)
		_, err := k.New(context.Background(), data, glidein.KindEnv{})
		if err != nil && strings.Contains(err.Error(), "unknown field") {
			t.Errorf("kind %s does not read its own settings: %v", name, err)
		}
		if k.Provider.Description == "" || k.Name != name {
			t.Errorf("kind %s: name %q, description %q", name, k.Name, k.Provider.Description)
		}
	}
}

// TestOpen: a site made again from its description (a factory entry) is
// the same site, a description with a field the kind does not know is
// refused, and a kind the program is not built with is an error naming
// those it is.
func TestOpen(t *testing.T) {
	reg := Registry()
	dir := t.TempDir()
	var desc json.RawMessage
	for _, tc := range []struct{ kind, settings string }{
		{"gridengine", `{"work_dir": "` + dir + `", "queue": "all.q", "walltime": "1h", "env": {"SGE_ROOT": "/opt/sge", "SGE_CELL": "c"}}`},
		{"slurm", `{"work_dir": "` + dir + `", "partition": "debug"}`},
	} {
		k, _ := reg.Lookup(tc.kind)
		s, err := k.New(context.Background(), json.RawMessage(tc.settings), glidein.KindEnv{})
		if err != nil {
			t.Fatal(err)
		}
		desc, err = s.(glidein.Describer).Describe()
		if err != nil {
			t.Fatal(err)
		}
		again, err := reg.Open(context.Background(), tc.kind, desc, glidein.KindEnv{})
		if err != nil {
			t.Fatal(err)
		}
		if d2, _ := again.(glidein.Describer).Describe(); string(d2) != string(desc) {
			t.Errorf("%s opened again: %s, want %s", tc.kind, d2, desc)
		}
	}
	var m map[string]any
	if err := json.Unmarshal(desc, &m); err != nil {
		t.Fatal(err)
	}
	m["Nodes"] = 3
	bad, _ := json.Marshal(m)
	if _, err := reg.Open(context.Background(), "slurm", bad, glidein.KindEnv{}); err == nil || !strings.Contains(err.Error(), `site.config: json: unknown field "Nodes"`) {
		t.Errorf("a description with an unknown field: %v", err)
	}
	if _, err := reg.Open(context.Background(), "nomad", nil, glidein.KindEnv{}); err == nil || !strings.Contains(err.Error(), `site.kind "nomad": want aws, gridengine, slurm or ssh`) {
		t.Errorf("an unknown kind: %v", err)
	}
}

// TestRegistryRefusesDuplicates: a table with a kind twice, or a kind
// with no New, is a program error found at its first use.
func TestRegistryRefusesDuplicates(t *testing.T) {
	k, _ := Registry().Lookup("ssh")
	for name, kinds := range map[string][]glidein.Kind{
		"twice":  {k, k},
		"no new": {{Name: "x"}},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: NewRegistry did not panic", name)
				}
			}()
			glidein.NewRegistry(kinds...)
		}()
	}
}
