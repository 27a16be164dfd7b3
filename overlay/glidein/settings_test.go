package glidein

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/overlay/api"
)

// TestFlagsRead reads a glidein's flags and knobs together: a flag over
// its knob, the end from the site's environment when nothing else gives
// one, the status file in the data directory, and each setting that
// cannot be, named.
func TestFlagsRead(t *testing.T) {
	started := time.Date(2026, 11, 25, 8, 0, 0, 0, time.UTC)
	dir := t.TempDir()
	glidein := Settings{ID: "pond-campus-hpc-1", Pool: "campus", CentralManager: "cm:9618", DataDir: dir, Started: started}
	env := func(v string) func(string) (string, bool) {
		return func(name string) (string, bool) { return v, name == EndEnv && v != "" }
	}
	for _, tc := range []struct {
		name  string
		s     Settings
		f     Flags
		knob  map[string]string
		want  string
		check func(t *testing.T, s Settings)
	}{
		{name: "flag over knob", s: glidein, f: Flags{Lifetime: "2h", CMTimeout: "1m"}, knob: map[string]string{"POND_GLIDEIN_LIFETIME": "1h", "POND_GLIDEIN_IDLE_TIMEOUT": "10m"},
			check: func(t *testing.T, s Settings) {
				if s.Lifetime != 2*time.Hour || s.IdleTimeout != 10*time.Minute || s.CMTimeout != time.Minute || s.StatusFile != filepath.Join(dir, StatusFile) {
					t.Errorf("%+v", s)
				}
			}},
		{name: "end from the site", s: glidein, f: Flags{Env: env("1795939200")},
			check: func(t *testing.T, s Settings) {
				if !s.EndTime.Equal(time.Unix(1795939200, 0)) {
					t.Errorf("end %v", s.EndTime)
				}
			}},
		{name: "end flag over the site's", s: glidein, f: Flags{EndTime: "0", Env: env("1795939200")},
			check: func(t *testing.T, s Settings) {
				if !s.EndTime.IsZero() {
					t.Errorf("end %v", s.EndTime)
				}
			}},
		{name: "a node's end", s: Settings{Started: started}, knob: map[string]string{"POND_END_TIME": "2026-11-25T10:00:00Z"},
			check: func(t *testing.T, s Settings) {
				if s.EndTime.Hour() != 10 {
					t.Errorf("end %v", s.EndTime)
				}
			}},
		{name: "bad site end", s: glidein, f: Flags{Env: env("soon")}, want: EndEnv + ` "soon": want a time`},
		{name: "end passed", s: glidein, f: Flags{EndTime: "2001-01-01T00:00:00Z"}, want: "the node's end has already passed"},
		{name: "bad duration", s: glidein, f: Flags{Grace: "a while"}, want: `-grace "a while"`},
		{name: "grace as long as the life", s: glidein, f: Flags{Lifetime: "10m", Grace: "10m"}, want: "-grace 10m0s: not shorter than the glidein's life of 10m0s"},
		{name: "bad id", s: Settings{ID: "pond g/1", Pool: "campus", CentralManager: "cm:1"}, want: `-glidein "pond g/1": want 1 to 64 letters`},
		{name: "no pool", s: Settings{ID: "g", CentralManager: "cm:1", DataDir: dir}, want: "name its pool with -pool"},
		{name: "no central manager", s: Settings{ID: "g", Pool: "campus", DataDir: dir}, want: "-condor-host"},
		{name: "no status file", s: Settings{ID: "g", Pool: "campus", CentralManager: "cm:1"}, want: "give it -data-dir (or -status-file)"},
		{name: "a glidein's flag on a node", f: Flags{IdleTimeout: "5m"}, want: "-idle-timeout: only a glidein has it"},
		{name: "a glidein's knob on a node", knob: map[string]string{"POND_GLIDEIN_LIFETIME": "1h"}, want: "POND_GLIDEIN_LIFETIME: only a glidein has it"},
		{name: "missing checks", s: Settings{ID: "g", Pool: "campus", CentralManager: "cm:1", DataDir: dir, Validate: filepath.Join(dir, "none.json")}, want: "-validate:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.s
			err := tc.f.Read(&s, tc.knob)
			if (tc.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
			if tc.check != nil {
				tc.check(t, s)
			}
		})
	}
}

// TestStartAndProbe starts a glidein whose check asks its central
// manager: it runs when the manager is of its pool, and fails validation,
// its status file saying so, when the manager is another pool's.
func TestStartAndProbe(t *testing.T) {
	pool := "campus"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(api.Self{Name: "cm", Pool: pool})
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	probe := CentralManagerProbe(addr, "campus", nil, func() string { return "" })
	checks := []api.ValidationCheck{{Type: api.CheckCentralManager}}
	dir := t.TempDir()
	s := Settings{ID: "pond-campus-hpc-1", Name: "g", Pool: "campus", CentralManager: addr, DataDir: dir,
		StatusFile: filepath.Join(dir, StatusFile), Lifetime: time.Hour, Checks: checks}
	rt, err := Start(t.Context(), s, nil, probe)
	if err != nil {
		t.Fatal(err)
	}
	if st := rt.Status(); st.ID != s.ID || st.EndTime.IsZero() || rt.DrainGrace() != 5*time.Minute {
		t.Errorf("status %+v, drain grace %v", st, rt.DrainGrace())
	}
	pool = "other"
	_, err = Start(t.Context(), s, nil, probe)
	var ve *ValidationError
	if !errors.As(err, &ve) || !strings.Contains(err.Error(), `belongs to pool "other", not "campus"`) {
		t.Fatalf("error %v, want a validation error naming the other pool", err)
	}
	data, _ := os.ReadFile(s.StatusFile)
	if !strings.Contains(string(data), "other") {
		t.Errorf("status file %s", data)
	}
}

func TestParseNodeEnd(t *testing.T) {
	for _, s := range []string{"", " 0 "} {
		if end, err := ParseNodeEnd(s); err != nil || !end.IsZero() {
			t.Errorf("ParseNodeEnd(%q) = %v, %v; want none", s, end, err)
		}
	}
	if end, err := ParseNodeEnd("1795939200"); err != nil || end.Unix() != 1795939200 {
		t.Errorf("%v %v", end, err)
	}
	if _, err := ParseNodeEnd("-1"); err == nil {
		t.Error("a negative end accepted")
	}
}
