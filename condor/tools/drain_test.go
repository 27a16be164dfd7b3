package tools_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/condor/daemon/testpool"
	"github.com/pond-htc/pond/condor/wire"
)

// TestDrainTool drains a machine with condor_drain as an administrator:
// condor_status shows it Drained with its schedule and reason, a user may
// neither drain nor cancel, bad arguments are refused with a reason, and
// -cancel makes it take jobs again.
func TestDrainTool(t *testing.T) {
	p := startPool(t)
	// The tool finds the machine in the collector before it asks its
	// startd: under load the startd's first ad may not be there yet.
	testpool.Eventually(t, 30*time.Second, "exec1 in condor_status", func() bool {
		return strings.Contains(p.must("status", "-af", "Machine"), "exec1")
	})
	admin := *p
	admin.env = nil
	for _, e := range p.env {
		if strings.HasPrefix(e, "POND_TOKEN=") {
			e = "POND_TOKEN=" + testpool.Token(t, "root", auth.Administrator)
		}
		admin.env = append(admin.env, e)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"exec1"}, "not permitted"},
		{[]string{"-cancel", "exec1"}, "not permitted"},
	} {
		if _, errs, code := p.run("drain", tc.args...); code != 1 || !strings.Contains(errs, tc.want) {
			t.Errorf("a user's drain %v: exit %d, %s; want %q", tc.args, code, errs, tc.want)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "want one machine name"},
		{[]string{"-graceful", "-fast", "exec1"}, "-graceful and -fast: choose one"},
		{[]string{"-cancel", "-reason", "x", "exec1"}, "-cancel takes no draining schedule"},
		{[]string{"-request-id", "1", "exec1"}, "-request-id names the drain -cancel ends"},
		{[]string{"-check", "true", "exec1"}, "unsupported option -check"},
		{[]string{"nonesuch"}, `no machine "nonesuch"`},
		{[]string{"-cancel", "exec1"}, "not draining"},
	} {
		if _, errs, code := admin.run("drain", tc.args...); code != 1 || !strings.Contains(errs, tc.want) {
			t.Errorf("drain %v: exit %d, %s; want %q", tc.args, code, errs, tc.want)
		}
	}
	out := admin.must("drain", "-quick", "-reason", "disk swap", "exec1")
	if !strings.Contains(out, "Sent request to drain exec1 (quick, request id 1") || !strings.Contains(out, "Reason: disk swap") {
		t.Errorf("drain printed:\n%s", out)
	}
	testpool.Eventually(t, 30*time.Second, "the drain in condor_status", func() bool {
		out := p.must("status")
		return strings.Contains(out, "Drained") && strings.Contains(out, "Draining machines") && strings.Contains(out, "quick") &&
			strings.Contains(out, "disk swap")
	})
	if out := p.must("status", "-af", "Draining", "DrainReason", "DrainingRequestId"); strings.TrimSpace(out) != "true disk swap 1" {
		t.Errorf("condor_status -af Draining DrainReason DrainingRequestId: %q", out)
	}
	var resp wire.DrainResponse
	if err := json.Unmarshal([]byte(admin.must("drain", "-cancel", "-json", "exec1")), &resp); err != nil || !resp.Cancelled ||
		resp.Draining || resp.RequestID != "1" {
		t.Errorf("drain -cancel -json: %+v (%v)", resp, err)
	}
	testpool.Eventually(t, 30*time.Second, "the drain to leave condor_status", func() bool {
		out := p.must("status")
		return !strings.Contains(out, "Drained") && !strings.Contains(out, "Draining machines")
	})
}
