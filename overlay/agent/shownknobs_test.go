package agent

import "testing"

// TestShownKnobs checks that /v1/self's configuration leaves out the knobs
// POND_SECRET_KNOBS names and those whose names say they hold a secret.
func TestShownKnobs(t *testing.T) {
	got := shownKnobs(map[string]string{
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
