package schedd

import (
	"strings"
	"testing"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/config"
	"github.com/pond-htc/pond/condor/jobqueue"
)

// TestEvalPolicy decides, for each kind of periodic expression, what the
// policy does, with HTCondor's reasons and codes and its order: hold
// before release before remove, the job's own policy before the system's.
func TestEvalPolicy(t *testing.T) {
	const (
		idle = jobqueue.Idle
		run  = jobqueue.Running
		held = jobqueue.Held
	)
	for _, tc := range []struct {
		name   string
		knobs  string // configuration
		ad     string // the job's attributes, new ClassAd syntax
		status jobqueue.Status
		want   policyDecision
	}{
		{"nothing set", "", `[PeriodicHold = false; PeriodicRelease = false; PeriodicRemove = false]`, idle, policyDecision{}},
		{"remove", "", `[QDate = 0; PeriodicRemove = (time() - QDate) > 120]`, idle,
			policyDecision{action: policyRemove, reason: "The job attribute PeriodicRemove expression '(time() - QDate) > 120' evaluated to TRUE"}},
		{"remove a held job", "", `[PeriodicRemove = true]`, held,
			policyDecision{action: policyRemove, reason: "The job attribute PeriodicRemove expression 'true' evaluated to TRUE"}},
		{"remove not yet", "", `[QDate = time() + 1000; PeriodicRemove = (time() - QDate) > 120]`, idle, policyDecision{}},
		{"hold", "", `[JobStatus = 2; PeriodicHold = JobStatus == 2]`, run,
			policyDecision{action: policyHold, code: 3, reason: "The job attribute PeriodicHold expression 'JobStatus == 2' evaluated to TRUE"}},
		{"hold with reason and subcode", "", `[PeriodicHold = true; PeriodicHoldReason = strcat("too ", "long"); PeriodicHoldSubCode = 7]`, idle,
			policyDecision{action: policyHold, code: 3, subcode: 7, reason: "too long"}},
		{"hold with an empty reason", "", `[PeriodicHold = true; PeriodicHoldReason = ""; PeriodicHoldSubCode = "x"]`, idle,
			policyDecision{action: policyHold, code: 3, reason: "The job attribute PeriodicHold expression 'true' evaluated to TRUE"}},
		{"hold does not apply to a held job", "", `[PeriodicHold = true]`, held, policyDecision{}},
		{"release", "", `[HoldReasonCode = 3; PeriodicRelease = HoldReasonCode == 3]`, held,
			policyDecision{action: policyRelease, reason: "The job attribute PeriodicRelease expression 'HoldReasonCode == 3' evaluated to TRUE"}},
		{"release does not apply to an idle job", "", `[PeriodicRelease = true]`, idle, policyDecision{}},
		{"hold before remove", "", `[PeriodicHold = true; PeriodicRemove = true]`, idle,
			policyDecision{action: policyHold, code: 3, reason: "The job attribute PeriodicHold expression 'true' evaluated to TRUE"}},
		{"release before remove", "", `[PeriodicRelease = true; PeriodicRemove = true]`, held,
			policyDecision{action: policyRelease, reason: "The job attribute PeriodicRelease expression 'true' evaluated to TRUE"}},
		{"a number is true unless zero", "", `[PeriodicRemove = 2]`, idle,
			policyDecision{action: policyRemove, reason: "The job attribute PeriodicRemove expression '2' evaluated to TRUE"}},
		{"zero", "", `[PeriodicRemove = 0]`, idle, policyDecision{}},
		{"a string does nothing", "", `[PeriodicRemove = "true"]`, idle, policyDecision{}},
		{"undefined does nothing", "", `[PeriodicRemove = NoSuchAttribute > 3]`, idle, policyDecision{}},
		{"an error does nothing", "", `[PeriodicHold = "a" + 1]`, idle, policyDecision{}},
		{"completed jobs are left alone", "", `[PeriodicRemove = true]`, jobqueue.Completed, policyDecision{}},
		{"system hold", "SYSTEM_PERIODIC_HOLD = RequestMemory > 100\n", `[RequestMemory = 200]`, idle,
			policyDecision{action: policyHold, code: 26, reason: "The system macro SYSTEM_PERIODIC_HOLD expression 'RequestMemory > 100' evaluated to TRUE"}},
		{"system hold reason and subcode",
			"SYSTEM_PERIODIC_HOLD = RequestMemory > 100\nSYSTEM_PERIODIC_HOLD_REASON = strcat(\"asked \", RequestMemory)\nSYSTEM_PERIODIC_HOLD_SUBCODE = 42\n",
			`[RequestMemory = 200]`, run, policyDecision{action: policyHold, code: 26, subcode: 42, reason: "asked 200"}},
		{"job policy before system policy", "SYSTEM_PERIODIC_HOLD = true\n", `[PeriodicHold = true]`, idle,
			policyDecision{action: policyHold, code: 3, reason: "The job attribute PeriodicHold expression 'true' evaluated to TRUE"}},
		{"system hold before job remove", "SYSTEM_PERIODIC_HOLD = true\n", `[PeriodicRemove = true]`, idle,
			policyDecision{action: policyHold, code: 26, reason: "The system macro SYSTEM_PERIODIC_HOLD expression 'true' evaluated to TRUE"}},
		{"system release", "SYSTEM_PERIODIC_RELEASE = HoldReasonCode == 26\nSYSTEM_PERIODIC_RELEASE_REASON = \"retry\"\n", `[HoldReasonCode = 26]`, held,
			policyDecision{action: policyRelease, reason: "retry"}},
		{"system remove", "SYSTEM_PERIODIC_REMOVE = NumJobStarts > 3\n", `[NumJobStarts = 4]`, run,
			policyDecision{action: policyRemove, reason: "The system macro SYSTEM_PERIODIC_REMOVE expression 'NumJobStarts > 3' evaluated to TRUE"}},
		{"system remove reason", "SYSTEM_PERIODIC_REMOVE = true\nSYSTEM_PERIODIC_REMOVE_REASON = \"gone\"\n", `[]`, held,
			policyDecision{action: policyRemove, reason: "gone"}},
		{"system undefined", "SYSTEM_PERIODIC_REMOVE = NoSuchAttribute\n", `[]`, idle, policyDecision{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := loadPeriodicPolicy(testConfig(t, tc.knobs))
			if err != nil {
				t.Fatal(err)
			}
			ad, err := classad.ParseNewAd(tc.ad)
			if err != nil {
				t.Fatal(err)
			}
			if got := evalPolicy(ad, tc.status, p); got != tc.want {
				t.Errorf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// TestLoadPeriodicPolicy reads the policy's knobs and refuses bad values,
// naming the knob.
func TestLoadPeriodicPolicy(t *testing.T) {
	t.Parallel()
	p, err := loadPeriodicPolicy(testConfig(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	if p.interval != DefaultPeriodicExprInterval || p.maxInterval != DefaultMaxPeriodicExprInterval ||
		p.timeslice != DefaultPeriodicExprTimeslice || p.system() {
		t.Errorf("defaults: %+v", p)
	}
	for _, tc := range []struct{ knobs, want string }{
		{"PERIODIC_EXPR_INTERVAL = 0\n", "PERIODIC_EXPR_INTERVAL"},
		{"PERIODIC_EXPR_INTERVAL = soon\n", "PERIODIC_EXPR_INTERVAL"},
		{"PERIODIC_EXPR_TIMESLICE = 2\n", "PERIODIC_EXPR_TIMESLICE"},
		{"SYSTEM_PERIODIC_HOLD = (\n", "SYSTEM_PERIODIC_HOLD"},
		{"SYSTEM_PERIODIC_REMOVE_REASON = \"unterminated\n", "SYSTEM_PERIODIC_REMOVE_REASON"},
	} {
		if _, err := loadPeriodicPolicy(testConfig(t, tc.knobs)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want one naming %s", tc.knobs, err, tc.want)
		}
	}
}

func testConfig(t *testing.T, knobs string) *config.Config {
	t.Helper()
	cfg := config.New(config.Options{})
	if err := cfg.ParseInto("test.cfg", []byte(knobs)); err != nil {
		t.Fatal(err)
	}
	return cfg
}
