package daemon

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/pond-htc/pond/condor/collector/history"
	"github.com/pond-htc/pond/condor/config"
)

func TestEffectiveConfig(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		src  string
		set  map[string]string // set at run time, as an agent does
		want map[string]string
	}{
		{"set knobs only, as written", "START = true\nMAX_JOBS_RUNNING = $(NUM_CPUS) * 2\n", nil,
			map[string]string{"START": "true", "MAX_JOBS_RUNNING": "$(NUM_CPUS) * 2"}},
		{"stamped machine attributes left out", "STARTD_ATTRS = Team\nTeam = \"physics\"\n",
			map[string]string{"PondCertExpiry": "1827510944", "PondTokenExpiry": "1795975274", "STARTD_ATTRS": "Team PondCertExpiry PondTokenExpiry", "CONDOR_HOST": "cm:9618"},
			map[string]string{"STARTD_ATTRS": "Team", "Team": `"physics"`, "CONDOR_HOST": "cm:9618"}},
		{"secrets redacted", "SEC_TOKEN = abc\nPOOL_PASSWORD = hunter2\nAPI_KEY = key-abc123\nPOND_ENCRYPT = enc-xyz\nMY_CRED = cred-777\nPOND_SECRET_KNOBS = MY_CRED\nSTART = false\nDSN = postgres://u:hunter2@db/pool\nVIA = $(POOL_PASSWORD)\n", nil,
			map[string]string{"SEC_TOKEN": "(secret)", "POOL_PASSWORD": "(secret)", "API_KEY": "(secret)", "POND_ENCRYPT": "(secret)",
				"MY_CRED": "(secret)", "POND_SECRET_KNOBS": "(secret)", "START": "false", "DSN": "(secret)", "VIA": "$(POOL_PASSWORD)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.New(config.Options{})
			if err := cfg.ParseInto("test", []byte(tc.src)); err != nil {
				t.Fatal(err)
			}
			for k, v := range tc.set {
				if err := cfg.Set(k, v); err != nil {
					t.Fatal(err)
				}
			}
			text, hash := EffectiveConfig(cfg)
			if hash != history.ConfigHash(text) {
				t.Fatalf("hash %s is not the text's", hash)
			}
			var got map[string]string
			if err := json.Unmarshal([]byte(text), &got); err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for k, v := range tc.want {
				if got[k] != v {
					t.Errorf("%s = %q, want %q", k, got[k], v)
				}
			}
			for _, secret := range []string{"abc", "hunter2", "key-abc123", "enc-xyz", "cred-777"} {
				if strings.Contains(text, secret) {
					t.Errorf("the text holds the secret %s: %s", secret, text)
				}
			}
		})
	}
}
