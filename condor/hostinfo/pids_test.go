package hostinfo

import (
	"slices"
	"strings"
	"testing"
)

func TestParseProcessIDFiles(t *testing.T) {
	for _, tt := range []struct {
		data string
		want int64
		ok   bool
	}{
		{"0.52 0.58 0.59 1/467 12345\n", 467, true},
		{"0.52 0.58 0.59 12/31999 2", 31999, true},
		{"0.52 0.58 0.59", 0, false},
		{"0.52 0.58 0.59 467 12345", 0, false},
		{"0.52 0.58 0.59 1/-4 12345", 0, false},
	} {
		n, err := ParseLoadAvgTasks([]byte(tt.data))
		if (err == nil) != tt.ok || n != tt.want {
			t.Errorf("ParseLoadAvgTasks(%q) = %d, %v; want %d, ok %v", tt.data, n, err, tt.want, tt.ok)
		}
	}
	for _, tt := range []struct {
		data string
		want int64
		ok   bool
	}{
		{"max\n", 0, true},
		{"4096\n", 4096, true},
		{"", 0, false},
		{"-1", 0, false},
		{"lots", 0, false},
	} {
		n, err := ParsePidsMax([]byte(tt.data))
		if (err == nil) != tt.ok || n != tt.want {
			t.Errorf("ParsePidsMax(%q) = %d, %v; want %d, ok %v", tt.data, n, err, tt.want, tt.ok)
		}
	}
	for _, tt := range []struct {
		data, hierarchy, dir string
		ok                   bool
	}{
		{"0::/system.slice/pond.service\n", "", "/system.slice/pond.service", true},
		{"9:name=systemd:/\n8:pids:/user.slice/a\n4:memory:/x\n0::/\n", "pids", "/user.slice/a", true},
		{"3:cpu,pids:/b/../c\n", "pids", "/c", true},
		{"4:memory:/x\n", "", "", false},
		{"0::relative\n", "", "", false},
		{"", "", "", false},
	} {
		h, d, err := ParsePidsCgroup([]byte(tt.data))
		if (err == nil) != tt.ok || h != tt.hierarchy || d != tt.dir {
			t.Errorf("ParsePidsCgroup(%q) = %q, %q, %v; want %q, %q, ok %v", tt.data, h, d, err, tt.hierarchy, tt.dir, tt.ok)
		}
	}
}

// TestReadProcessIDs reads this host's bounds: the kernel has them all.
func TestReadProcessIDs(t *testing.T) {
	ids, err := ReadProcessIDs()
	if err != nil {
		t.Fatal(err)
	}
	if ids.PIDMax <= ReservedPIDs || ids.ThreadsMax <= 0 || ids.InUse <= 0 || ids.CgroupMax < 0 || (ids.CgroupMax > 0) != (ids.Cgroup != "") {
		t.Errorf("ReadProcessIDs() = %+v", ids)
	}
}

func FuzzParseLoadAvgTasks(f *testing.F) {
	for _, s := range []string{"0.52 0.58 0.59 1/467 12345\n", "", "1 2 3 /", "1 2 3 1/99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data string) {
		if n, err := ParseLoadAvgTasks([]byte(data)); err == nil && n < 0 {
			t.Fatalf("ParseLoadAvgTasks(%q) = %d", data, n)
		}
	})
}

func FuzzParsePidsMax(f *testing.F) {
	for _, s := range []string{"max\n", "12\n", "", "-1", "+5", "9999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data string) {
		if n, err := ParsePidsMax([]byte(data)); err == nil && n < 0 {
			t.Fatalf("ParsePidsMax(%q) = %d", data, n)
		}
	})
}

func FuzzParsePidsCgroup(f *testing.F) {
	for _, s := range []string{"0::/a\n", "8:pids:/b\n0::/\n", "::", "1:pids:\n", "1:pids:/../..\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data string) {
		h, d, err := ParsePidsCgroup([]byte(data))
		if err != nil {
			return
		}
		if h != "" && h != "pids" || !strings.HasPrefix(d, "/") || slices.Contains(strings.Split(d, "/"), "..") {
			t.Fatalf("ParsePidsCgroup(%q) = %q, %q", data, h, d)
		}
	})
}
