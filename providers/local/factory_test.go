package local

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/overlay/factory"
	"github.com/pond-htc/pond/providers"
	"github.com/zclconf/go-cty/cty"
)

// TestFactoryCredentials checks that the central manager of a pool whose
// factory has entries (FactoryPools) is started with the factory's
// delegated key and CA, private files the agent accepts (it refuses to
// start with a key the authority does not trust within limits, or a CA the
// sea's did not issue), limited to the pool's glideins; that no other node
// gets them; and that a pool destroyed and made again keeps the same key
// rather than adding one more to the trusted keys.
func TestFactoryCredentials(t *testing.T) {
	wd := t.TempDir()
	p := New().(*Provider)
	req := configureReq(wd)
	req.FactoryPools = []string{"campus"}
	if err := providers.Err(p.Configure(context.Background(), req).Diagnostics); err != nil {
		t.Fatal(err)
	}
	cmdline := func(d cty.Value) string {
		data, _ := os.ReadFile("/proc/" + d.GetAttr("pid").AsBigFloat().Text('f', 0) + "/cmdline")
		return strings.ReplaceAll(string(data), "\x00", " ")
	}
	delegated := func() []auth.DelegatedKey {
		_, ds, err := auth.ReadTrustedKeys(filepath.Join(wd, ".pond", "auth", auth.TrustedKeysFile))
		if err != nil {
			t.Fatal(err)
		}
		return ds
	}
	dir := p.factoryDir("campus")
	for round := range 2 {
		campus := create(t, p, "pool.campus", poolConfig(map[string]cty.Value{"nodes": cty.NumberIntVal(2)}))
		other := create(t, p, "pool.other", poolConfig(nil))
		destroyed := false
		// A round that fails stops its agents all the same.
		t.Cleanup(func() {
			if !destroyed {
				destroy(t, p, "pool.campus", campus)
				destroy(t, p, "pool.other", other)
			}
		})
		for _, d := range append(campus.GetAttr("node_details").AsValueSlice(), other.GetAttr("node_details").AsValueSlice()...) {
			args := cmdline(d)
			want := d.GetAttr("name").AsString() == "campus-0"
			if got := strings.Contains(args, "-factory-key "+filepath.Join(dir, FactoryKeyFile)); got != want {
				t.Errorf("round %d: %s: -factory-key given: %v, want %v: %s", round, d.GetAttr("name").AsString(), got, want, args)
			}
			if got := strings.Contains(args, "-factory-ca "+filepath.Join(dir, FactoryCAFile)); got != want {
				t.Errorf("round %d: %s: -factory-ca given: %v, want %v: %s", round, d.GetAttr("name").AsString(), got, want, args)
			}
		}
		for _, f := range []string{dir, filepath.Join(dir, FactoryKeyFile), filepath.Join(dir, FactoryCAFile)} {
			fi, err := os.Stat(f)
			if err != nil || fi.Mode().Perm()&0o077 != 0 {
				t.Errorf("%s: %v %v, want it private", f, fi, err)
			}
		}
		ds := delegated()
		if len(ds) != 1 || ds[0].Limits.SubjectPrefix != "node/"+factory.Prefix("campus") {
			t.Fatalf("round %d: delegated keys %+v, want one limited to node/%s", round, ds, factory.Prefix("campus"))
		}
		sub, err := auth.ReadSubCA(filepath.Join(dir, FactoryCAFile))
		if err != nil || sub.Prefix != factory.Prefix("campus") || time.Until(sub.Cert.NotAfter) < 24*time.Hour {
			t.Fatalf("round %d: the delegated CA: %+v, %v", round, sub, err)
		}
		destroy(t, p, "pool.campus", campus)
		destroy(t, p, "pool.other", other)
		destroyed = true
	}
}
