package factory_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/factory"
	"github.com/pond-htc/pond/overlay/glidein"
	"github.com/pond-htc/pond/overlay/glidein/ssh"
	"github.com/pond-htc/pond/overlay/glidein/ssh/sshtest"
)

// child is what a factory process of TestFactoryCrashAdopts runs with.
type child struct {
	DataDir string               `json:"data_dir"`
	CM      string               `json:"cm"`
	SSH     ssh.Config           `json:"ssh"`
	Entry   api.FactoryEntrySpec `json:"entry"`
}

// sleeper starts glideins that only sleep: the crash test counts
// submissions, not jobs.
func sleeper(context.Context, api.FactoryEntrySpec, string) (glidein.Request, error) {
	return glidein.Request{Binary: "/bin/sh", Args: []string{"-c", "exec sleep 120"}}, nil
}

func newCrashFactory(c child, site glidein.Site, grace time.Duration) (*factory.Factory, error) {
	f, err := factory.New(factory.Options{
		Pool: "campus", DataDir: c.DataDir,
		Source:      &factory.WirePool{CentralManager: func() string { return c.CM }},
		Sites:       func(api.FactoryEntrySpec) (glidein.Site, error) { return site, nil },
		Launch:      sleeper,
		Interval:    50 * time.Millisecond,
		SubmitGrace: grace,
		JoinTimeout: time.Hour,
	})
	if err != nil {
		return nil, err
	}
	return f, f.SetEntry(c.Entry)
}

// runChild runs a factory until it is killed.
func runChild(conf string) int {
	var c child
	if err := json.Unmarshal([]byte(conf), &c); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	site, err := ssh.New(c.SSH)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	f, err := newCrashFactory(c, site, time.Second)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	f.Run(context.Background())
	return 0
}

// TestFactoryCrashAdopts kills a factory process with SIGKILL at a random
// point of its submissions, trial after trial, and restarts it on the same
// journal: each time the restarted factory adopts what the site has and
// submits only what is missing, so that the site ends with exactly the
// glideins the jobs need (no duplicate), each in the journal (no orphan).
func TestFactoryCrashAdopts(t *testing.T) {
	t.Parallel()
	srv := sshtest.Start(t, 1)
	site := sshSite(t, srv, 20)
	cm := startCM(t)
	const want = 3
	submitJobs(t, cm, want, 1, 64)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	trials := 5
	if testing.Short() {
		trials = 3
	}
	for trial := range trials {
		c := child{DataDir: t.TempDir(), CM: cm.APIAddr(), SSH: sshConfig(srv, 20),
			Entry: api.FactoryEntrySpec{Name: fmt.Sprintf("t%d", trial), Site: api.FactorySite{Kind: "ssh"},
				Template: api.FactoryTemplate{CPUs: 1, MemoryMB: 64, Lifetime: api.Duration(5 * time.Minute)},
				Limits:   api.FactoryLimits{MaxQueued: want, MaxRunning: want, MaxSubmitPerCycle: 1}}}
		prefix := glidein.IDPrefix + "campus-" + c.Entry.Name + "-"
		conf, _ := json.Marshal(c)
		cmd := exec.Command(exe)
		cmd.Env = append(os.Environ(), childEnv+"="+string(conf))
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Somewhere in its first submissions (each takes tens of ms).
		time.Sleep(time.Duration(200+rand.IntN(1500)) * time.Millisecond)
		cmd.Process.Kill()
		cmd.Wait()
		before := active(t, site, prefix)

		f, err := newCrashFactory(c, site, time.Second)
		if err != nil {
			t.Fatalf("trial %d: restart: %v", trial, err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			if err := f.Cycle(t.Context()); err != nil {
				t.Fatalf("trial %d: %v", trial, err)
			}
			gs := active(t, site, prefix)
			if len(gs) > want {
				t.Fatalf("trial %d: %d glideins at the site, want %d: a duplicate", trial, len(gs), want)
			}
			if len(gs) == want {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("trial %d: %d glideins at the site after 30s, want %d; status %+v", trial, len(gs), want, f.Status())
			}
			time.Sleep(100 * time.Millisecond)
		}
		// A few more cycles change nothing.
		for range 5 {
			f.Cycle(t.Context())
			time.Sleep(50 * time.Millisecond)
		}
		gs := active(t, site, prefix)
		if len(gs) != want {
			t.Fatalf("trial %d: %d glideins, want %d", trial, len(gs), want)
		}
		journaled := map[string]bool{}
		for _, r := range f.Records() {
			journaled[r.ID] = true
		}
		seen := map[string]bool{}
		for _, g := range gs {
			if seen[g.ID] {
				t.Fatalf("trial %d: %s twice", trial, g.ID)
			}
			seen[g.ID] = true
			if !journaled[g.ID] {
				t.Fatalf("trial %d: %s runs at the site but is not in the journal: an orphan", trial, g.ID)
			}
		}
		t.Logf("trial %d: killed with %d glideins at the site; restarted with %d", trial, len(before), len(gs))
		f.Close()
		for _, g := range gs {
			site.Cancel(context.Background(), g.ID)
		}
	}
}
