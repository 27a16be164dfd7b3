package startd

import (
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/config"
)

func TestClaimLease(t *testing.T) {
	tests := []struct {
		knobs            map[string]string
		alive, lease     time.Duration
		wantErrSubstring string
	}{
		{knobs: nil, alive: 2 * time.Second, lease: 10 * time.Second},
		{knobs: map[string]string{"ALIVE_INTERVAL": "0.5s", "MAX_CLAIM_ALIVES_MISSED": "4"}, alive: 500 * time.Millisecond, lease: 2 * time.Second},
		{knobs: map[string]string{"ALIVE_INTERVAL": "300", "MAX_CLAIM_ALIVES_MISSED": "6"}, alive: 300 * time.Second, lease: 30 * time.Minute},
		{knobs: map[string]string{"ALIVE_INTERVAL": "0"}, wantErrSubstring: "ALIVE_INTERVAL"},
		{knobs: map[string]string{"ALIVE_INTERVAL": "soon"}, wantErrSubstring: "ALIVE_INTERVAL"},
		{knobs: map[string]string{"MAX_CLAIM_ALIVES_MISSED": "0"}, wantErrSubstring: "MAX_CLAIM_ALIVES_MISSED"},
		{knobs: map[string]string{"MAX_CLAIM_ALIVES_MISSED": "many"}, wantErrSubstring: "MAX_CLAIM_ALIVES_MISSED"},
	}
	for _, tt := range tests {
		cfg := config.New(config.Options{})
		for k, v := range tt.knobs {
			if err := cfg.Set(k, v); err != nil {
				t.Fatal(err)
			}
		}
		alive, lease, err := ClaimLease(cfg)
		if tt.wantErrSubstring != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErrSubstring) {
				t.Errorf("ClaimLease(%v) = %v, %v, %v; want an error naming %s", tt.knobs, alive, lease, err, tt.wantErrSubstring)
			}
			continue
		}
		if err != nil || alive != tt.alive || lease != tt.lease {
			t.Errorf("ClaimLease(%v) = %v, %v, %v; want %v, %v", tt.knobs, alive, lease, err, tt.alive, tt.lease)
		}
	}
}
