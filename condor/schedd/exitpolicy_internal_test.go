package schedd

import (
	"testing"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/jobqueue"
)

// TestOnExitHold: on_exit_hold holds with the job's on_exit_hold_reason
// and on_exit_hold_subcode, evaluated with the exit attributes, as
// HTCondor's shadow does; without them, the default reason and subcode 0.
func TestOnExitHold(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		ad     string
		exit   string
		hold   bool
		reason string
		sub    int
	}{
		{"no OnExitHold", `[Cmd = "x"]`, "0", false, "", 0},
		{"literal false", `[OnExitHold = false; ExitCode = 3]`, "0", false, "", 0},
		{"false", `[OnExitHold = ExitCode != 0]`, "0", false, "", 0},
		{"default reason", `[OnExitHold = ExitCode != 0]`, "2", true, onExitHoldDefault, 0},
		{"reason and subcode", `[OnExitHold = ExitCode != 0; OnExitHoldReason = "bad exit"; OnExitHoldSubCode = 42]`,
			"2", true, "bad exit", 42},
		{"expressions of the exit", `[OnExitHold = true; OnExitHoldReason = strcat("exit ", ExitCode); OnExitHoldSubCode = ExitCode + 100]`,
			"7", true, "exit 7", 107},
		{"reason not a string", `[OnExitHold = true; OnExitHoldReason = 3; OnExitHoldSubCode = "x"]`,
			"1", true, onExitHoldDefault, 0},
		{"undefined reason", `[OnExitHold = true; OnExitHoldReason = Nope]`, "1", true, onExitHoldDefault, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ad, err := classad.ParseNewAd(tt.ad)
			if err != nil {
				t.Fatal(err)
			}
			reason, sub, hold := onExitHold(ad, jobqueue.Ad{"ExitCode": tt.exit})
			if hold != tt.hold || reason != tt.reason || sub != tt.sub {
				t.Errorf("onExitHold = %q, %d, %v; want %q, %d, %v", reason, sub, hold, tt.reason, tt.sub, tt.hold)
			}
		})
	}
}

// TestOnExitRemove: a job's OnExitRemove sees the attributes of its
// end, whether it reads them or is a literal (evaluated without a copy of
// the ad).
func TestOnExitRemove(t *testing.T) {
	t.Parallel()
	for ad, want := range map[string]bool{
		`[Cmd = "x"]`:                                  false,
		`[OnExitRemove = true; ExitCode = 9]`:          true,
		`[OnExitRemove = false]`:                       false,
		`[OnExitRemove = ExitCode == 0; ExitCode = 9]`: true,
		`[OnExitRemove = Nope]`:                        false,
	} {
		parsed, err := classad.ParseNewAd(ad)
		if err != nil {
			t.Fatal(err)
		}
		if got := holdExpr(parsed, "OnExitRemove", jobqueue.Ad{"ExitCode": "0"}); got != want {
			t.Errorf("%s with ExitCode 0: OnExitRemove = %v, want %v", ad, got, want)
		}
	}
}
