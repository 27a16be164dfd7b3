package hostinfo

import (
	"errors"
	"io/fs"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/testenv"
)

// meminfo is the start of a real /proc/meminfo.
const meminfo = `MemTotal:       16318480 kB
MemFree:         1234567 kB
MemAvailable:    8388608 kB
Buffers:          456789 kB
HugePages_Total:       0
Hugepagesize:       2048 kB
`

func TestParseMeminfo(t *testing.T) {
	for _, tc := range []struct {
		name, data, field string
		want              int64
		err               string
	}{
		{"total", meminfo, "MemTotal", 16318480, ""},
		{"available", meminfo, "MemAvailable", 8388608, ""},
		{"no unit", meminfo, "HugePages_Total", 0, ""},
		{"last line without newline", "MemTotal: 2048 kB", "MemTotal", 2048, ""},
		{"prefix of another field", "MemTotalX: 1 kB\nMemTotal: 2 kB\n", "MemTotal", 2, ""},
		{"missing", "MemFree: 1 kB\n", "MemAvailable", 0, "no MemAvailable field"},
		{"empty file", "", "MemTotal", 0, "no MemTotal field"},
		{"no value", "MemTotal:\n", "MemTotal", 0, "want a number of kB"},
		{"other unit", "MemTotal: 2 MB\n", "MemTotal", 0, "want a number of kB"},
		{"trailing words", "MemTotal: 2 kB extra\n", "MemTotal", 0, "want a number of kB"},
		{"not a number", "MemTotal: lots kB\n", "MemTotal", 0, `"lots" is not a number of kB`},
		{"negative", "MemTotal: -5 kB\n", "MemTotal", 0, "is not a number of kB"},
		{"too large", "MemTotal: 99999999999999999999 kB\n", "MemTotal", 0, "is not a number of kB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseMeminfo([]byte(tc.data), tc.field)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ParseMeminfo = %d, %v; want an error containing %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParseMeminfo = %d, %v; want %d", got, err, tc.want)
			}
		})
	}
}

func TestParseLoadAvg(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		want       float64
		err        string
	}{
		{"real", "0.52 0.58 0.59 1/467 12345\n", 0.52, ""},
		{"idle", "0.00 0.01 0.05 1/80 1\n", 0, ""},
		{"busy", "12.75 8.00 4.10 9/900 4242", 12.75, ""},
		{"leading space", "  1.5 1 1", 1.5, ""},
		{"empty", "", 0, "empty load average"},
		{"blank", " \n", 0, "empty load average"},
		{"not a number", "high 1 1", 0, `"high" is not a number`},
		{"negative", "-1 0 0", 0, "not a number of at least 0"},
		{"NaN", "NaN 0 0", 0, "not a number of at least 0"},
		{"infinite", "Inf 0 0", 0, "not a number of at least 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseLoadAvg([]byte(tc.data))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ParseLoadAvg = %v, %v; want an error containing %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParseLoadAvg = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestParseUptime(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		want       time.Duration
		err        string
	}{
		{"real", "350735.47 234388.90\n", 350735*time.Second + 470*time.Millisecond, ""},
		{"just booted", "0.00 0.00", 0, ""},
		{"one field", "12", 12 * time.Second, ""},
		{"empty", "", 0, "empty uptime"},
		{"not a number", "long ago", 0, `"long" is not a number of seconds`},
		{"negative", "-3 0", 0, "is not a number of seconds"},
		{"NaN", "NaN 0", 0, "is not a number of seconds"},
		{"too long", "1e300 0", 0, "is not a number of seconds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseUptime([]byte(tc.data))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ParseUptime = %v, %v; want an error containing %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got.Round(time.Millisecond) != tc.want {
				t.Fatalf("ParseUptime = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestArchName(t *testing.T) {
	for goarch, want := range map[string]string{
		"amd64":   "X86_64",
		"386":     "INTEL",
		"arm64":   "aarch64",
		"ppc64":   "PPC64",
		"ppc64le": "ppc64le",
		"s390x":   "s390x",
		"riscv64": "riscv64",
		"loong64": "loongarch64",
	} {
		if got := ArchName(goarch); got != want {
			t.Errorf("ArchName(%q) = %q, want %q", goarch, got, want)
		}
	}
}

func TestOpSysName(t *testing.T) {
	for goos, want := range map[string]string{
		"linux":   "LINUX",
		"darwin":  "OSX",
		"freebsd": "FREEBSD",
		"windows": "WINDOWS",
	} {
		if got := OpSysName(goos); got != want {
			t.Errorf("OpSysName(%q) = %q, want %q", goos, got, want)
		}
	}
}

// TestThisMachine reads the facts of the machine the test runs on; the
// /proc ones are skipped where there is no /proc.
func TestThisMachine(t *testing.T) {
	if CPUs() < 1 {
		t.Errorf("CPUs() = %d", CPUs())
	}
	if Arch() == "" || OpSys() == "" {
		t.Errorf("Arch() = %q, OpSys() = %q", Arch(), OpSys())
	}
	if free, err := DiskFreeKiB(t.TempDir()); err != nil || free < 0 {
		t.Errorf("DiskFreeKiB = %d, %v", free, err)
	}
	if _, err := DiskFreeKiB("/no/such/directory"); err == nil {
		t.Errorf("DiskFreeKiB of a missing directory: no error")
	}
	noProc := func(err error) bool { return errors.Is(err, fs.ErrNotExist) }
	total, err := TotalMemoryMiB()
	if noProc(err) {
		testenv.SkipOrFail(t, "no /proc/meminfo")
	}
	if err != nil || total <= 0 {
		t.Errorf("TotalMemoryMiB = %d, %v", total, err)
	}
	if avail, err := AvailableMemoryMiB(); err != nil || avail < 0 || avail > total {
		t.Errorf("AvailableMemoryMiB = %d, %v (total %d)", avail, err, total)
	}
	if la, err := LoadAvg(); err != nil && !noProc(err) || la < 0 {
		t.Errorf("LoadAvg = %v, %v", la, err)
	}
	if up, err := Uptime(); err != nil && !noProc(err) || up < 0 {
		t.Errorf("Uptime = %v, %v", up, err)
	}
}

func FuzzParseMeminfo(f *testing.F) {
	for _, s := range []string{meminfo, "", "MemTotal:\n", "MemTotal: 1 MB", "MemTotal: -1 kB", "MemTotal: 9999999999999999999 kB"} {
		f.Add(s, "MemTotal")
	}
	f.Add(meminfo, "HugePages_Total")
	f.Fuzz(func(t *testing.T, data, field string) {
		kib, err := ParseMeminfo([]byte(data), field)
		if err == nil && kib < 0 {
			t.Fatalf("ParseMeminfo(%q, %q) = %d", data, field, kib)
		}
		if err == nil && !strings.Contains(data, field+":") {
			t.Fatalf("ParseMeminfo(%q, %q) found a field the data does not have", data, field)
		}
	})
}

func FuzzParseLoadAvg(f *testing.F) {
	for _, s := range []string{"0.52 0.58 0.59 1/467 12345\n", "", "-1", "NaN", "1e309", "0x1p3 0 0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data string) {
		v, err := ParseLoadAvg([]byte(data))
		if err == nil && (v < 0 || math.IsNaN(v) || math.IsInf(v, 0)) {
			t.Fatalf("ParseLoadAvg(%q) = %v", data, v)
		}
	})
}

func FuzzParseUptime(f *testing.F) {
	for _, s := range []string{"350735.47 234388.90\n", "", "-3", "NaN", "1e300", "9223372036.854775807"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data string) {
		d, err := ParseUptime([]byte(data))
		if err == nil && d < 0 {
			t.Fatalf("ParseUptime(%q) = %v", data, d)
		}
	})
}
