package agent

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/startd"
	"github.com/pond-htc/pond/condor/submit"
	"github.com/pond-htc/pond/condor/tools"
	"github.com/pond-htc/pond/condor/wire"
	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/health"
)

// TestQuarantineAndEndTimeShown runs a node that cannot start its first
// job, its execute directory broken (POND_BLACKHOLE_FAILURES = 1): the node is quarantined, and its API
// (/v1/self), its serf tags and its machine ad say so and why; once lifted,
// they no longer do. An end time set at run time shows in /v1/self and
// the machine ad.
func TestQuarantineAndEndTimeShown(t *testing.T) {
	t.Parallel()
	cfgPath := filepath.Join(t.TempDir(), "condor_config")
	conf := "POND_BLACKHOLE_FAILURES = 1\nNEGOTIATOR_INTERVAL = 1\nNEGOTIATOR_MIN_INTERVAL = 0\nUPDATE_INTERVAL = 1\nNUM_CPUS = 2\nMEMORY = 1024\n"
	if err := os.WriteFile(cfgPath, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := ParseArgs([]string{"-name", "hole", "-config", cfgPath}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	a := startAgents(t, c)[0]
	client := api.NewClient(a.APIAddr())
	ctx := context.Background()
	// A file where the execute directory should be: the machine cannot
	// start a job, its own fault.
	execute := a.daemons.Master.Startd().ExecuteDir()
	if err := os.RemoveAll(execute); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(execute, nil, 0o600); err != nil {
		t.Fatal(err)
	}

	jobDir := t.TempDir()
	os.Chmod(jobDir, 0o755)
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	f, err := submit.Parse(filepath.Join(jobDir, "job.sub"), []byte("executable = /bin/false\nqueue\n"))
	if err != nil {
		t.Fatal(err)
	}
	sc := wire.NewSchedd(a.APIAddr(), "")
	if _, err := tools.SubmitFile(ctx, sc, f, submit.Options{Owner: u.Username, SubmitDir: jobDir,
		LookupEnv: func(string) (string, bool) { return "", false }}); err != nil {
		t.Fatal(err)
	}
	var self *api.Self
	waitFor(t, time.Minute, "the node to be quarantined", func() error {
		if self, err = client.Self(ctx); err != nil {
			return err
		}
		// The startd quarantines the machine, then tells the agent, which
		// sets the tag: wait for both.
		if self.Quarantine == nil || self.Tags[api.TagQuarantined] == "" {
			return errNotYet
		}
		return nil
	})
	if !strings.Contains(self.Quarantine.Reason, "could not start") || time.Until(self.Quarantine.Until) < 20*time.Minute {
		t.Errorf("/v1/self quarantine = %+v", self.Quarantine)
	}
	if tag := self.Tags[api.TagQuarantined]; tag == "" || !strings.HasPrefix(self.Quarantine.Reason, tag) {
		t.Errorf("quarantined tag %q, reason %q", tag, self.Quarantine.Reason)
	}
	waitFor(t, 10*time.Second, "the machine ad to show the quarantine", func() error {
		if q, _ := a.MachineAd().EvalAttr("PondQuarantined").BoolValue(); !q {
			return errNotYet
		}
		return nil
	})
	record := filepath.Join(a.cfg.DataDir, health.QuarantineFile)
	if b, err := os.ReadFile(record); err != nil || !strings.Contains(string(b), "could not start") {
		t.Errorf("the quarantine's record %s: %q, %v", record, b, err)
	}

	// The machine mended, as an administrator does before lifting the
	// quarantine: the job, matched again, no longer fails for the
	// machine's fault and quarantines it anew.
	if err := os.Remove(execute); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(execute, 0o755); err != nil {
		t.Fatal(err)
	}
	a.startd().Lift("test")
	waitFor(t, 10*time.Second, "the quarantine to be gone", func() error {
		if self, err = client.Self(ctx); err != nil {
			return err
		}
		if self.Quarantine != nil || self.Tags[api.TagQuarantined] != "" {
			return errNotYet
		}
		return nil
	})

	if _, err := os.Stat(record); !os.IsNotExist(err) {
		t.Errorf("the quarantine's record outlives its lift: %v", err)
	}

	end := time.Now().Add(3 * time.Hour).Truncate(time.Second)
	if err := a.SetEndTime(end); err != nil {
		t.Fatal(err)
	}
	if self, err = client.Self(ctx); err != nil || !self.EndTime.Equal(end) {
		t.Errorf("/v1/self end time %v (%v), want %v", self.EndTime, err, end)
	}
	waitFor(t, 10*time.Second, "the machine ad to show the end time", func() error {
		if e, _ := a.MachineAd().EvalAttr("PondEndTime").IntValue(); e != end.Unix() {
			return errNotYet
		}
		return nil
	})
	if err := a.SetEndTime(time.Time{}); err != nil {
		t.Fatal(err)
	}
	if self, err = client.Self(ctx); err != nil || !self.EndTime.IsZero() {
		t.Errorf("/v1/self end time %v (%v) after it was taken away", self.EndTime, err)
	}
}

// errNotYet says that a condition waitFor waits for does not hold yet.
var errNotYet = errors.New("not yet")

// TestConfiguredEndTime runs a node that is no glidein with an end time
// in its configuration as RFC 3339: its startd knows that end (the agent
// gives it in seconds since 1970 under the same knob), /v1/self shows it,
// and SetEndTime moves it, through a later reconfiguration too.
func TestConfiguredEndTime(t *testing.T) {
	end := time.Now().Add(2 * time.Hour).Truncate(time.Second).UTC()
	cfgPath := filepath.Join(t.TempDir(), "condor_config")
	conf := "POND_END_TIME = " + end.Format(time.RFC3339) + "\nNUM_CPUS = 1\nMEMORY = 512\n"
	if err := os.WriteFile(cfgPath, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := ParseArgs([]string{"-name", "lease", "-config", cfgPath}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !c.EndTime.Equal(end) {
		t.Fatalf("configured end time %v, want %v", c.EndTime, end)
	}
	a := startAgents(t, c)[0]
	if got := a.startd().EndTime(); !got.Equal(end) {
		t.Errorf("the startd's end time %v, want %v", got, end)
	}
	self, err := api.NewClient(a.APIAddr()).Self(context.Background())
	if err != nil || !self.EndTime.Equal(end) {
		t.Errorf("/v1/self end time %v (%v), want %v", self.EndTime, err, end)
	}
	later := end.Add(time.Hour)
	if err := a.SetEndTime(later); err != nil {
		t.Fatal(err)
	}
	if err := a.daemons.Set(map[string]string{"NEGOTIATOR_MIN_INTERVAL": "1"}); err != nil {
		t.Fatal(err)
	}
	if got := a.startd().EndTime(); !got.Equal(later) {
		t.Errorf("the startd's end time after SetEndTime and a reconfiguration %v, want %v", got, later)
	}
	if got := a.nodeEnd(); !got.Equal(later) {
		t.Errorf("the node's end for daemons started again %v, want %v", got, later)
	}
}

// TestQuarantineSurvivesRestart starts nodes on data directories that hold
// a quarantine's record, as a quarantined node's agent leaves it: a
// quarantine not yet over holds again (API, tags, machine ad, and no job
// is started), one that is over is forgotten, and a record that cannot be
// read stops the agent, naming the file, instead of letting the node take
// jobs it had refused.
func TestQuarantineSurvivesRestart(t *testing.T) {
	t.Parallel()
	const reason = "5 jobs in a row failed within 1m0s of their start"
	record := func(t *testing.T, body string) string {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, health.QuarantineFile), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	quarantine := func(until time.Time) string {
		b, err := json.Marshal(startd.Quarantine{Reason: reason, Since: time.Now().Add(-time.Minute), Until: until})
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	start := func(t *testing.T, dataDir string) (*Agent, error) {
		c, err := ParseArgs([]string{"-name", "hole", "-bind", "127.0.0.1:0", "-api", "127.0.0.1:0", "-data-dir", dataDir,
			"-gossip-profile", "fast", "-insecure-api"}, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		a, err := New(ctx, c, nil)
		if err != nil {
			cancel()
			return nil, err
		}
		done := make(chan error, 1)
		go func() { done <- a.Run(ctx) }()
		t.Cleanup(func() { cancel(); <-done })
		return a, nil
	}

	t.Run("holds", func(t *testing.T) {
		until := time.Now().Add(time.Hour).Truncate(time.Second)
		a, err := start(t, record(t, quarantine(until)))
		if err != nil {
			t.Fatal(err)
		}
		self, err := api.NewClient(a.APIAddr()).Self(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if self.Quarantine == nil || self.Quarantine.Reason != reason || !self.Quarantine.Until.Equal(until) {
			t.Fatalf("/v1/self quarantine after a restart = %+v", self.Quarantine)
		}
		if self.Tags[api.TagQuarantined] != reason {
			t.Errorf("quarantined tag %q, want %q", self.Tags[api.TagQuarantined], reason)
		}
		waitFor(t, 10*time.Second, "the machine ad to show the quarantine", func() error {
			if q, _ := a.MachineAd().EvalAttr("PondQuarantined").BoolValue(); !q {
				return errNotYet
			}
			return nil
		})
	})
	t.Run("over", func(t *testing.T) {
		dir := record(t, quarantine(time.Now().Add(-time.Second)))
		a, err := start(t, dir)
		if err != nil {
			t.Fatal(err)
		}
		if q := a.quarantine(); q != nil {
			t.Errorf("a quarantine that was over holds after a restart: %+v", q)
		}
	})
	for name, body := range map[string]string{"garbled": "{not json", "no end": `{"reason":"x"}`} {
		t.Run(name, func(t *testing.T) {
			dir := record(t, body)
			_, err := start(t, dir)
			if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, health.QuarantineFile)) {
				t.Errorf("a record that cannot be read: err = %v, want one naming the file", err)
			}
		})
	}
}
