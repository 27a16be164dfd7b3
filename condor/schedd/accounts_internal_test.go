package schedd

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/config"
	"github.com/pond-htc/pond/condor/internal/asuser"
)

// TestOwnerAccountsKept: the schedd looks a job owner's account up once
// for PASSWD_CACHE_REFRESH, however many of the owner's events it
// writes, and again after a reconfig, as HTCondor's daemons do; with
// PASSWD_CACHE_REFRESH = 0, at every event; a PASSWD_CACHE_REFRESH that is
// not a duration is refused by New and by Reconfig.
func TestOwnerAccountsKept(t *testing.T) {
	t.Parallel()
	cfgOf := func(text string) *config.Config {
		cfg := config.New(config.Options{Host: config.HostInfo{FullHostname: "submit.example.org", Hostname: "submit",
			IPAddress: "127.0.0.1", CPUs: 1, MemoryMB: 1024}})
		if err := cfg.ParseInto("test.cfg", []byte(text)); err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	var lookups atomic.Int32
	account := func(name string) (*asuser.Account, error) {
		lookups.Add(1)
		return &asuser.Account{Name: name, UID: 4242, GID: 4242}, nil
	}
	if _, err := New(context.Background(), Options{Config: cfgOf("PASSWD_CACHE_REFRESH = soon\n"), Name: "schedd@submit",
		DataDir: t.TempDir(), Account: account}); err == nil {
		t.Error("New took PASSWD_CACHE_REFRESH = soon")
	}
	s, err := New(context.Background(), Options{Config: cfgOf("PASSWD_CACHE_REFRESH = 600\n"), Name: "schedd@submit",
		Address: "submit.example.org:9618", DataDir: t.TempDir(), Account: account})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	<-s.idleLoaded
	s.asRoot = true // as the schedd acts as owners only when it runs as root
	ad := classad.NewAd()
	ad.SetString("Owner", "alice")
	for range 3 {
		if a, err := s.jobAccount(ad); err != nil || a == nil || a.UID != 4242 {
			t.Fatalf("jobAccount = %+v, %v", a, err)
		}
	}
	if n := lookups.Load(); n != 1 {
		t.Errorf("%d lookups for three events, want 1", n)
	}
	if err := s.Reconfig(cfgOf("PASSWD_CACHE_REFRESH = soon\n")); err == nil {
		t.Error("Reconfig took PASSWD_CACHE_REFRESH = soon")
	}
	if err := s.Reconfig(cfgOf("PASSWD_CACHE_REFRESH = 600\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.jobAccount(ad); err != nil {
		t.Fatal(err)
	}
	if n := lookups.Load(); n != 2 {
		t.Errorf("%d lookups after a reconfig, want 2", n)
	}
	if err := s.Reconfig(cfgOf("PASSWD_CACHE_REFRESH = 0\n")); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := s.jobAccount(ad); err != nil {
			t.Fatal(err)
		}
	}
	if n := lookups.Load(); n != 4 {
		t.Errorf("%d lookups with PASSWD_CACHE_REFRESH = 0 and two events, want 4", n)
	}
}
