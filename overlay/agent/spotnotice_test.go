package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/overlay/glidein"
	"github.com/pond-htc/pond/overlay/glidein/ec2"
	"github.com/pond-htc/pond/overlay/glidein/ec2/ec2test"
)

// TestGlideinSpotNotice runs a glidein agent, in this process, that
// watches amazon-ec2-metadata-mock while a long job runs on it: on the
// spot interruption notice, or the rebalance recommendation, it drains at
// once (the job is evicted, back in its schedd's queue), says why in its
// machine ad, status and log, and ends, long before its idle timeout or
// lifetime.
func TestGlideinSpotNotice(t *testing.T) {
	for _, tc := range []struct {
		name   string
		notice ec2test.Notice
		reason string
	}{
		{"spot interruption", ec2test.SpotInterruption, glidein.ReasonSpotInterruption},
		{"rebalance", ec2test.Rebalance, glidein.ReasonRebalance},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const delay = 12 * time.Second
			endpoint := ec2test.StartMetadataMock(t, tc.notice, delay)
			mockStarted := time.Now()
			cm := startCM(t, nil)
			jobLog := submitSleep(t, cm, 600)
			g := runGlideinAgent(t, cm, &Config{Name: "g", Role: "node", ConfigFile: fastCondor(t, ""), Glidein: "pond-spot",
				Lifetime: time.Hour, IdleTimeout: time.Hour, CMTimeout: time.Minute,
				Notices: ec2.Notices{Spot: true, Endpoint: endpoint, Interval: 300 * time.Millisecond}})
			waitFor(t, delay-time.Since(mockStarted)-time.Second, "the job to run on the glidein before the notice", func() error {
				if st, _ := jobStatus(t, cm); st != "2" {
					return fmt.Errorf("job status %s", st)
				}
				return nil
			})
			if err := g.wait(t, delay+30*time.Second); err != nil {
				t.Fatalf("Run: %v", err)
			}
			if took := time.Since(mockStarted); took > delay+15*time.Second {
				t.Errorf("the glidein ended %s after the notice, want at once", (took - delay).Round(time.Second))
			}
			st := readStatus(t, g.a.cfg.StatusFile)
			if st.Phase != glidein.PhaseEnded || st.Reason != tc.reason || st.ExitCode == nil || *st.ExitCode != 0 ||
				st.Drain == nil || st.Drain.Evicted != 1 || !strings.Contains(st.Message, "EC2 ") {
				t.Fatalf("status %+v, drain %+v; want ended for %s with the job evicted", st, st.Drain, tc.reason)
			}
			ad := g.a.MachineAd()
			if got, _ := ad.EvalAttr("PondDrainReason").StringValue(); got != tc.reason {
				t.Errorf("machine ad's PondDrainReason = %q, want %q", got, tc.reason)
			}
			// The startd advertises it in its slot ads too.
			sc := g.a.daemons.Master.Config()
			if attrs, _ := sc.Get("STARTD_ATTRS"); !strings.Contains(attrs, "PondDrainReason") {
				t.Errorf("the startd's STARTD_ATTRS = %q, want PondDrainReason in it", attrs)
			}
			if v, _ := sc.Get("PondDrainReason"); v != `"`+tc.reason+`"` {
				t.Errorf("the startd's PondDrainReason = %s, want %q", v, tc.reason)
			}
			if !strings.Contains(g.log.String(), "draining at once") || !strings.Contains(g.log.String(), tc.reason) {
				t.Errorf("the log does not say why it drained:\n%s", g.log.String())
			}
			waitFor(t, 20*time.Second, "the job back in the queue", func() error {
				if got, queued := jobStatus(t, cm); got != "1" || !queued {
					return fmt.Errorf("job status %s, queued %v", got, queued)
				}
				return nil
			})
			if data, _ := os.ReadFile(jobLog); !strings.Contains(string(data), "004 (") {
				t.Errorf("the job's log has no eviction event:\n%s", data)
			}
		})
	}
}

// TestSpotNoticeFlags: the flag and the knobs, and what is refused.
func TestSpotNoticeFlags(t *testing.T) {
	glide := []string{"-glidein", "pond-n1", "-pool", "campus", "-condor-host", "127.0.0.1:1"}
	for _, tc := range []struct {
		name   string
		args   []string
		config string
		want   ec2.Notices
		err    string
	}{
		{name: "off by default", args: glide, want: ec2.Notices{Interval: 5 * time.Second}},
		{name: "flag", args: append(glide, "-spot-notices"), want: ec2.Notices{Spot: true, Interval: 5 * time.Second}},
		{name: "knobs", args: glide, config: "POND_SPOT_NOTICES = true\nPOND_IMDS_ENDPOINT = http://127.0.0.1:1338\nPOND_IMDS_INTERVAL = 2s\n",
			want: ec2.Notices{Spot: true, Endpoint: "http://127.0.0.1:1338", Interval: 2 * time.Second}},
		{name: "flag over knob", args: append(glide, "-spot-notices=false"), config: "POND_SPOT_NOTICES = true\n", want: ec2.Notices{Interval: 5 * time.Second}},
		{name: "not a glidein", args: []string{"-spot-notices"}, err: "-spot-notices: only a glidein watches for them"},
		{name: "bad endpoint", args: glide, config: "POND_IMDS_ENDPOINT = 169.254.169.254\n", err: `POND_IMDS_ENDPOINT = "169.254.169.254": want a URL`},
		{name: "bad interval", args: glide, config: "POND_IMDS_INTERVAL = 0s\n", err: "POND_IMDS_INTERVAL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"-name", "n", "-data-dir", t.TempDir()}
			if tc.config != "" {
				path := filepath.Join(t.TempDir(), "condor_config")
				if err := os.WriteFile(path, []byte(tc.config), 0o600); err != nil {
					t.Fatal(err)
				}
				args = append(args, "-config", path)
			}
			var log syncBuffer
			cfg, err := ParseArgs(append(args, tc.args...), &log)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ParseArgs: %v, want an error containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Notices != tc.want {
				t.Fatalf("Notices = %+v, want %+v", cfg.Notices, tc.want)
			}
		})
	}
}
