package knobs

import (
	"testing"

	"github.com/pond-htc/pond/condor/config"
)

// TestShown checks that /v1/self's configuration leaves out the knobs
// POND_SECRET_KNOBS names and those whose names say they hold a secret.
func TestShown(t *testing.T) {
	got := Shown(map[string]string{
		"POND_SECRET_KNOBS":   "DB_CONN, Api_Credential",
		"DB_CONN":             "postgres://u:p@h/db",
		"API_CREDENTIAL":      "xyz",
		"POOL_PASSWORD":       "pw",
		"NEGOTIATOR_INTERVAL": "5",
	})
	if len(got) != 1 || got["NEGOTIATOR_INTERVAL"] != "5" {
		t.Fatalf("shown knobs %v, want NEGOTIATOR_INTERVAL only", got)
	}
}

// TestSecretKnobsAgree checks that config_val (condor/config) hides the
// knobs the agent hides (overlay/knobs): condor may not import overlay, so
// each package says which names hold a secret.
func TestSecretKnobsAgree(t *testing.T) {
	names := []string{"POOL_PASSWORD", "SEC_TOKEN", "API_KEY", "KEY", "db_secret", "KEYBOARD", "TEAM", "NEGOTIATOR_INTERVAL",
		"POND_SECRET_KNOBS", "SEC_TOKEN_DIRECTORY"}
	for _, k := range All() {
		names = append(names, k.Name)
	}
	for _, n := range names {
		if got, want := config.IsSecret(n), IsSecret(n); got != want {
			t.Errorf("%s: config.IsSecret %v, knobs.IsSecret %v", n, got, want)
		}
	}
}
