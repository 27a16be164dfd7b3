package ec2

import (
	"flag"
	"io"
	"strings"
	"testing"
	"time"
)

func TestNoticeFlags(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		args    []string
		knobs   map[string]string
		glidein string
		want    Notices
		err     string
	}{
		{name: "off by default", glidein: "g1", want: Notices{Interval: 5 * time.Second}},
		{name: "flag", args: []string{"-spot-notices"}, glidein: "g1", want: Notices{Spot: true, Interval: 5 * time.Second}},
		{name: "knobs", glidein: "g1", knobs: map[string]string{"POND_SPOT_NOTICES": "true", "POND_IMDS_ENDPOINT": "http://127.0.0.1:1338", "POND_IMDS_INTERVAL": "2s"},
			want: Notices{Spot: true, Endpoint: "http://127.0.0.1:1338", Interval: 2 * time.Second}},
		{name: "flag over knob", args: []string{"-spot-notices=false"}, glidein: "g1", knobs: map[string]string{"POND_SPOT_NOTICES": "true"},
			want: Notices{Interval: 5 * time.Second}},
		{name: "not a glidein", args: []string{"-spot-notices"}, err: "-spot-notices: only a glidein watches for them"},
		{name: "bad endpoint", glidein: "g1", knobs: map[string]string{"POND_IMDS_ENDPOINT": "169.254.169.254"}, err: `POND_IMDS_ENDPOINT = "169.254.169.254": want a URL`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			var nf NoticeFlags
			nf.Define(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			got, err := nf.Read(tc.knobs, tc.glidein)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Read: %v, want an error containing %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Read = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}
