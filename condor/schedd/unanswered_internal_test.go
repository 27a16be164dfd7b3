package schedd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"syscall"
	"testing"

	"github.com/pond-htc/pond/condor/wire"
)

// TestUnanswered: which failed activations leave open whether the startd
// took the job.
func TestUnanswered(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"connection broken after the request", fmt.Errorf("calling x: %w", io.EOF), true},
		{"out of time", fmt.Errorf("calling x: %w", context.DeadlineExceeded), true},
		{"a gateway lost the way", &wire.Error{Status: http.StatusBadGateway, Msg: "tunnel dropped"}, true},
		{"a gateway timed out", &wire.Error{Status: http.StatusGatewayTimeout, Msg: "timeout"}, true},
		{"not sent: refused", fmt.Errorf("calling x: %w: %w", wire.ErrNotSent, syscall.ECONNREFUSED), false},
		{"not sent: a stale connection", fmt.Errorf("calling x: %w: %w", wire.ErrNotSent, errors.New("write: broken pipe")), false},
		{"refused by the startd", &wire.Error{Status: http.StatusConflict, Msg: "draining"}, false},
		{"the startd failed to start it", &wire.Error{Status: http.StatusInternalServerError, Msg: "no scratch directory"}, false},
		{"the startd does not run", &wire.Error{Status: http.StatusServiceUnavailable, Msg: "startd does not run on x"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := unanswered(tc.err); got != tc.want {
				t.Errorf("unanswered(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}
