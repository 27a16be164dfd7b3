package schedd

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/pond-htc/pond/condor/wire"
)

// TestCredentialHold checks which activation failures hold the job for
// its credential, with HTCondor's HoldReasonCode, rather than count a
// shadow exception or fail it.
func TestCredentialHold(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		err  error
		code int // 0: not a credential's
	}{
		{"expired token", fmt.Errorf("activate: %w", &wire.Error{Status: http.StatusUnauthorized, Msg: "token expired"}), holdCodeExpiredCredential},
		{"revoked token", &wire.Error{Status: http.StatusUnauthorized, Msg: "token revoked"}, holdCodeCorruptedCredential},
		{"refused job", &wire.Error{Status: http.StatusConflict, Msg: "draining"}, 0},
		{"scope", &wire.Error{Status: http.StatusForbidden, Msg: "no DAEMON"}, 0},
		{"network", errors.New("connection refused"), 0},
	} {
		reason, code, ok := credentialHold("slot1@n1", tc.err)
		if ok != (tc.code != 0) || code != tc.code {
			t.Errorf("%s: code %d, ok %v; want %d", tc.name, code, ok, tc.code)
		}
		if ok && (!strings.Contains(reason, "slot1@n1") || !strings.Contains(reason, "token") || !strings.Contains(reason, "release")) {
			t.Errorf("%s: hold reason %q does not name the slot, the credential and the way out", tc.name, reason)
		}
	}
}
