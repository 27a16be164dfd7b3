package cedarport

import (
	"slices"
	"testing"

	"github.com/pond-htc/pond/condor/auth"
)

// TestFSScopes checks what a local user proven by FS may do: a user other
// than root and the agent's own may submit only to a root agent, which
// runs its jobs with that user's rights, never with the agent's.
func TestFSScopes(t *testing.T) {
	rw := []auth.Scope{auth.Read, auth.Write}
	for _, tc := range []struct {
		agent, user uint32
		want        []auth.Scope
	}{
		{0, 0, []auth.Scope{auth.Read, auth.Write, auth.Administrator}},
		{1000, 0, []auth.Scope{auth.Read, auth.Write, auth.Administrator}},
		{0, 1001, rw},
		{1000, 1000, rw},
		{1000, 1001, []auth.Scope{auth.Read}},
		{1000, 65534, []auth.Scope{auth.Read}},
	} {
		if got := fsScopes(tc.agent, tc.user); !slices.Equal(got, tc.want) {
			t.Errorf("fsScopes(agent %d, user %d) = %v, want %v", tc.agent, tc.user, got, tc.want)
		}
	}
}
