package startd

import (
	"testing"
	"time"
)

// TestEvictionTimes checks when a preempted job is soft-killed and how
// long it then has, as HTCondor's startd works them out from its
// retirement time left, MachineMaxVacateTime and JobMaxVacateTime.
func TestEvictionTimes(t *testing.T) {
	t.Parallel()
	s := time.Second
	cases := []struct {
		name                string
		left, machine, job  time.Duration
		hasJob              bool
		wantWait, wantVacat time.Duration
	}{
		{name: "no retirement: the machine's vacate time", machine: 10 * s, wantVacat: 10 * s},
		{name: "no retirement: a shorter job's", machine: 10 * s, job: 3 * s, hasJob: true, wantVacat: 3 * s},
		{name: "no retirement: a longer job's is cut to the machine's", machine: 10 * s, job: 60 * s, hasJob: true, wantVacat: 10 * s},
		{name: "retirement: soft-killed the vacate time before its end", left: 60 * s, machine: 10 * s, wantWait: 50 * s, wantVacat: 10 * s},
		{name: "retirement shorter than the vacate time: at once", left: 4 * s, machine: 10 * s, wantVacat: 10 * s},
		{name: "a job's shorter vacate time", left: 60 * s, machine: 10 * s, job: 2 * s, hasJob: true, wantWait: 58 * s, wantVacat: 2 * s},
		{name: "a longer vacate time out of the retirement left", left: 60 * s, machine: 10 * s, job: 30 * s, hasJob: true,
			wantWait: 30 * s, wantVacat: 30 * s},
		{name: "a longer vacate time than the retirement left: all of it", left: 20 * s, machine: 10 * s, job: 30 * s, hasJob: true,
			wantVacat: 20 * s},
		{name: "less retirement left than the machine's vacate time", left: 5 * s, machine: 10 * s, job: 30 * s, hasJob: true,
			wantVacat: 10 * s},
		{name: "a zero vacate time: killed at the end of the retirement", left: 8 * s, machine: 0, wantWait: 8 * s},
		{name: "negative inputs are none", left: -5 * s, machine: 10 * s, job: -1 * s, hasJob: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			wait, vacate := evictionTimes(tc.left, tc.machine, tc.job, tc.hasJob)
			if wait != tc.wantWait || vacate != tc.wantVacat {
				t.Errorf("evictionTimes(%v, %v, %v, %v) = %v, %v; want %v, %v", tc.left, tc.machine, tc.job, tc.hasJob,
					wait, vacate, tc.wantWait, tc.wantVacat)
			}
		})
	}
}
