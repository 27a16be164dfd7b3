package wire

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestProject checks that a projection keeps the attributes named, as
// the ad spells them, whatever the case of the names asked for.
func TestProject(t *testing.T) {
	ad := Ad{"Name": `"slot1@x"`, "Cpus": "4", "Memory": "1024", "GPUs": "0", "State": `"Unclaimed"`}
	cases := []struct {
		name  string
		attrs []string
		want  Ad
	}{
		{"none: the whole ad", nil, ad},
		{"as spelt", []string{"Cpus", "Memory"}, Ad{"Cpus": "4", "Memory": "1024"}},
		{"another case", []string{"cpus", "MEMORY", "gpus"}, Ad{"Cpus": "4", "Memory": "1024", "GPUs": "0"}},
		{"mixed, one missing", []string{"Name", "state", "Disk"}, Ad{"Name": `"slot1@x"`, "State": `"Unclaimed"`}},
		{"twice", []string{"Cpus", "cpus", "CPUS"}, Ad{"Cpus": "4"}},
		{"only missing", []string{"Disk", "Arch"}, Ad{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if diff := cmp.Diff(c.want, Project(ad, c.attrs)); diff != "" {
				t.Errorf("Project(%v) (-want +got):\n%s", c.attrs, diff)
			}
		})
	}
}

// FuzzProject checks Project against the plain definition: every
// attribute of the ad whose name is among those asked for, compared
// without regard to case.
func FuzzProject(f *testing.F) {
	f.Add("Name Cpus Memory State", "cpus NAME disk")
	f.Add("a B c", "")
	f.Fuzz(func(t *testing.T, names, asked string) {
		ad := Ad{}
		seen := map[string]bool{}
		for _, n := range strings.Fields(names) {
			if seen[strings.ToLower(n)] {
				continue // an ad's names differ in more than case
			}
			seen[strings.ToLower(n)] = true
			ad[n] = "v" + n
		}
		attrs := strings.Fields(asked)
		want := ad
		if len(attrs) > 0 {
			want = Ad{}
			for k, v := range ad {
				for _, n := range attrs {
					if strings.EqualFold(k, n) {
						want[k] = v
					}
				}
			}
		}
		if diff := cmp.Diff(want, Project(ad, attrs)); diff != "" {
			t.Errorf("Project(%v, %v) (-want +got):\n%s", ad, attrs, diff)
		}
	})
}

// BenchmarkProject projects a slot ad of 100 attributes on the four a
// flock's spare capacity reads, one of them missing.
func BenchmarkProject(b *testing.B) {
	ad := Ad{"Cpus": "1", "Memory": "1024", "PartitionableSlot": "false"}
	for i := range 97 {
		ad["Attribute"+strings.Repeat("x", i%7)+string(rune('A'+i%26))+string(rune('a'+i/26))] = "1"
	}
	attrs := []string{"Cpus", "Memory", "GPUs", "PartitionableSlot"}
	b.ReportAllocs()
	for b.Loop() {
		Project(ad, attrs)
	}
}
