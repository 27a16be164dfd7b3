package main

import (
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/pond-htc/pond/condor/startd/jobshim"
)

// TestJobSupervisorStartsFirst: the binary started as a job's supervisor
// runs it before the packages it links that are not the standard
// library's are initialised (the AWS SDK's SSM client alone allocates
// 1.4 MB at its initialisation): the start of each job does not pay for
// them. A few small ones that need nothing else may come first.
func TestJobSupervisorStartsFirst(t *testing.T) {
	cmd := exec.Command("/proc/self/exe")
	cmd.Args = jobshim.ProbeSpec().Args // a supervisor's job that exits at once
	cmd.Env = []string{"GODEBUG=inittrace=1"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	const limit = 64 << 10
	inits, bytes := 0, 0
	var heavy []string
	for _, line := range strings.Split(string(out), "\n") {
		// init PATH @0.5 ms, 0.01 ms clock, BYTES bytes, N allocs
		f := strings.Fields(line)
		if len(f) < 9 || f[0] != "init" || f[8] != "bytes," {
			continue
		}
		inits++
		n, err := strconv.Atoi(f[7])
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		if first, _, _ := strings.Cut(f[1], "/"); strings.Contains(first, ".") {
			bytes += n
			heavy = append(heavy, f[1]+" "+f[7])
		}
	}
	if inits == 0 {
		t.Fatalf("no initialisation traced: %s", out)
	}
	if bytes > limit {
		t.Errorf("the packages initialised before the supervisor ran allocated %d bytes, more than %d: %v", bytes, limit, heavy)
	}
}
