package local

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/providers"
	"github.com/pond-htc/pond/providers/factorycred"
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
	t.Parallel()
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
			if got := strings.Contains(args, "-factory-key "+filepath.Join(dir, factorycred.KeyFile)); got != want {
				t.Errorf("round %d: %s: -factory-key given: %v, want %v: %s", round, d.GetAttr("name").AsString(), got, want, args)
			}
			if got := strings.Contains(args, "-factory-ca "+filepath.Join(dir, factorycred.CAFile)); got != want {
				t.Errorf("round %d: %s: -factory-ca given: %v, want %v: %s", round, d.GetAttr("name").AsString(), got, want, args)
			}
		}
		for _, f := range []string{dir, filepath.Join(dir, factorycred.KeyFile), filepath.Join(dir, factorycred.CAFile)} {
			fi, err := os.Stat(f)
			if err != nil || fi.Mode().Perm()&0o077 != 0 {
				t.Errorf("%s: %v %v, want it private", f, fi, err)
			}
		}
		ds := delegated()
		if len(ds) != 1 || ds[0].Limits.SubjectPrefix != "node/"+api.FactoryPrefix("campus") {
			t.Fatalf("round %d: delegated keys %+v, want one limited to node/%s", round, ds, api.FactoryPrefix("campus"))
		}
		sub, err := auth.ReadSubCA(filepath.Join(dir, factorycred.CAFile))
		if err != nil || sub.Prefix != api.FactoryPrefix("campus") || time.Until(sub.Cert.NotAfter) < 24*time.Hour {
			t.Fatalf("round %d: the delegated CA: %+v, %v", round, sub, err)
		}
		destroy(t, p, "pool.campus", campus)
		destroy(t, p, "pool.other", other)
		destroyed = true
	}
}

// TestFactoryCredentialsToRunningManager starts a pool with no factory,
// then configures the provider as for a configuration that gained a
// glidein with a factory block in that pool: the plan of the pool
// replaces nothing, and factorycred.Ensure gives the running
// central manager the delegated key and CA, which its factory then
// holds (limited to the pool's glideins); it sends nothing while they
// are current, and sends a renewed CA when the one held has less than a
// day left.
func TestFactoryCredentialsToRunningManager(t *testing.T) {
	t.Parallel()
	wd := t.TempDir()
	p := New().(*Provider)
	if err := providers.Err(p.Configure(context.Background(), configureReq(wd)).Diagnostics); err != nil {
		t.Fatal(err)
	}
	cfg := poolConfig(nil)
	campus := create(t, p, "pool.campus", cfg)
	t.Cleanup(func() { destroy(t, p, "pool.campus", campus) })
	cm := campus.GetAttr("central_manager").AsString()
	c := p.client(cm)
	tok, err := p.auth.Mint("pondctl", []auth.Scope{auth.SeaAdmin}, 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	c = c.WithToken(tok)
	st, err := c.Factory(t.Context())
	if err != nil || st.Credentials != nil || !st.NeedsCredentials {
		t.Fatalf("a pool started with no factory: %+v, %v", st, err)
	}

	// The configuration gains a factory in the pool.
	p2 := New().(*Provider)
	req := configureReq(wd)
	req.FactoryPools = []string{"campus"}
	if err := providers.Err(p2.Configure(context.Background(), req).Diagnostics); err != nil {
		t.Fatal(err)
	}
	plan := p2.PlanResourceChange(t.Context(), providers.PlanRequest{TypeName: "pool", Address: "pool.campus",
		Prior: campus, Config: cfg, ProposedNew: campus})
	if err := providers.Err(plan.Diagnostics); err != nil || len(plan.RequiresReplace) > 0 {
		t.Fatalf("the plan of the pool once its factory has entries: replace %v, %v", plan.RequiresReplace, err)
	}
	sent, err := factorycred.Ensure(t.Context(), wd, "campus", c)
	if err != nil || !sent {
		t.Fatalf("credentials sent: %v, %v", sent, err)
	}
	dir := p2.factoryDir("campus")
	k, err := auth.ReadSigningKey(filepath.Join(dir, factorycred.KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	st, err = c.Factory(t.Context())
	if err != nil || st.Credentials == nil || st.Credentials.KeyID != k.ID() || st.Credentials.Prefix != api.FactoryPrefix("campus") ||
		time.Until(st.Credentials.CAExpires) < 24*time.Hour {
		t.Fatalf("the factory's credentials once sent: %+v, %v", st.Credentials, err)
	}
	if sent, err := factorycred.Ensure(t.Context(), wd, "campus", c); err != nil || sent {
		t.Fatalf("credentials sent again while current: %v, %v", sent, err)
	}

	// A CA near its end is renewed at the next call.
	short, err := p.auth.DelegateCA(api.FactoryPrefix("campus"), 12*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	key, err := os.ReadFile(filepath.Join(dir, factorycred.KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.SetFactoryCredentials(t.Context(), api.FactoryCredentials{Key: string(key), CA: string(short)}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, factorycred.CAFile), short, 0o600); err != nil {
		t.Fatal(err)
	}
	if sent, err := factorycred.Ensure(t.Context(), wd, "campus", c); err != nil || !sent {
		t.Fatalf("a CA with 12h left: sent %v, %v", sent, err)
	}
	st, err = c.Factory(t.Context())
	if err != nil || st.Credentials == nil || time.Until(st.Credentials.CAExpires) < 24*time.Hour {
		t.Fatalf("the factory's credentials once renewed: %+v, %v", st.Credentials, err)
	}
}
