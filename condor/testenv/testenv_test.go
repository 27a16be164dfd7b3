package testenv

import (
	"fmt"
	"testing"
)

// recorder is a TB that records whether the helper skipped or failed.
type recorder struct {
	skipped, failed, logged string
}

func (r *recorder) Helper()           {}
func (r *recorder) Log(args ...any)   { r.logged = fmt.Sprint(args...) }
func (r *recorder) Skip(args ...any)  { r.skipped = fmt.Sprint(args...) }
func (r *recorder) Fatal(args ...any) { r.failed = fmt.Sprint(args...) }

func TestSkipOrFail(t *testing.T) {
	for _, tc := range []struct {
		ci         string
		skip, fail bool
	}{
		{ci: "", skip: true},
		{ci: "false", skip: true},
		{ci: "0", skip: true},
		{ci: "true", fail: true},
		{ci: "1", fail: true},
		{ci: "yes", fail: true},
	} {
		t.Run("CI="+tc.ci, func(t *testing.T) {
			t.Setenv("CI", tc.ci)
			var r recorder
			SkipOrFailf(&r, "moto is %s", "missing")
			if (r.skipped != "") != tc.skip || (r.failed != "") != tc.fail {
				t.Fatalf("CI=%q: skipped %q, failed %q; want skip %v, fail %v", tc.ci, r.skipped, r.failed, tc.skip, tc.fail)
			}
			if got := r.skipped + r.failed; got[:len("moto is missing")] != "moto is missing" {
				t.Fatalf("the reason is lost: %q", got)
			}
		})
	}
}

func TestLogOrFail(t *testing.T) {
	for ci, fail := range map[string]bool{"": false, "true": true} {
		t.Setenv("CI", ci)
		var r recorder
		LogOrFail(&r, "the oracle is missing")
		if (r.failed != "") != fail || (r.logged != "") == fail || r.skipped != "" {
			t.Errorf("CI=%q: logged %q, failed %q, skipped %q; want fail %v", ci, r.logged, r.failed, r.skipped, fail)
		}
	}
}
