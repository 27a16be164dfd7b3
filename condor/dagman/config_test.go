package dagman

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestReadConfig(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       Config
		err        string
	}{
		{"knobs", "# c\nDAGMAN_MAX_JOBS_SUBMITTED = 2\ndagman_max_jobs_idle=3\nDAGMAN_MAX_PRE_SCRIPTS = 4\nDAGMAN_MAX_POST_SCRIPTS = 5\n" +
			"DAGMAN_MAX_SUBMITS_PER_INTERVAL = 6\nDAGMAN_USER_LOG_SCAN_INTERVAL = \\\n 7\n",
			Config{MaxJobs: 2, MaxIdle: 3, MaxPre: 4, MaxPost: 5, MaxSubmitsPerInterval: 6, ScanInterval: 7 * time.Second}, ""},
		{"other knobs named", "\nDAGMAN_ALWAYS_RUN_POST = True\nFOO=1\n", Config{Ignored: []string{"D/c.config:2: DAGMAN_ALWAYS_RUN_POST", "D/c.config:3: FOO"}}, ""},
		{"not a number", "DAGMAN_MAX_JOBS_IDLE = many\n", Config{}, `c.config:1: DAGMAN_MAX_JOBS_IDLE = "many" is not a non-negative integer`},
		{"negative", "\n\nDAGMAN_MAX_JOBS_SUBMITTED = -1\n", Config{}, `c.config:3: DAGMAN_MAX_JOBS_SUBMITTED = "-1"`},
		{"zero scan interval", "DAGMAN_USER_LOG_SCAN_INTERVAL = 0\n", Config{}, "is not a number of seconds from 1 to 86400"},
		{"huge scan interval", "DAGMAN_USER_LOG_SCAN_INTERVAL = 99999999999999\n", Config{}, "from 1 to 86400"},
		{"no equals", "DAGMAN_MAX_JOBS_IDLE 3\n", Config{}, "c.config:1: expected NAME = VALUE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "c.config"), []byte(tc.text), 0o644); err != nil {
				t.Fatal(err)
			}
			c, err := ReadConfig(&DAG{File: filepath.Join(dir, "x.dag"), Config: "c.config"})
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for i := range c.Ignored {
				c.Ignored[i] = strings.Replace(c.Ignored[i], dir, "D", 1)
			}
			if c.MaxJobs != tc.want.MaxJobs || c.MaxIdle != tc.want.MaxIdle || c.MaxPre != tc.want.MaxPre || c.MaxPost != tc.want.MaxPost ||
				c.MaxSubmitsPerInterval != tc.want.MaxSubmitsPerInterval || c.ScanInterval != tc.want.ScanInterval ||
				strings.Join(c.Ignored, "|") != strings.Join(tc.want.Ignored, "|") {
				t.Errorf("got %+v, want %+v", c, tc.want)
			}
		})
	}
}

func FuzzConfig(f *testing.F) {
	f.Add("DAGMAN_MAX_JOBS_SUBMITTED = 2\nFOO = \\\nbar\n# x\n")
	f.Add("DAGMAN_USER_LOG_SCAN_INTERVAL = 0")
	f.Fuzz(func(t *testing.T, text string) {
		c, err := parseConfig("c.config", []byte(text))
		if err != nil {
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("error of type %T: %v", err, err)
			}
			return
		}
		if c.MaxJobs < 0 || c.MaxIdle < 0 || c.MaxPre < 0 || c.MaxPost < 0 || c.MaxSubmitsPerInterval < 0 || c.ScanInterval < 0 {
			t.Fatalf("a negative knob: %+v", c)
		}
	})
}
