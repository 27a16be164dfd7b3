package slurm

import (
	"strings"
	"testing"
)

// TestControllerOf reads the controller's hosts and port from slurm.conf
// files as Slurm writes them.
func TestControllerOf(t *testing.T) {
	for _, tc := range []struct {
		name, conf string
		hosts      []string
		port       string
	}{
		{"name and address", "SlurmctldHost=ctl(10.0.0.1)\nSlurmctldPort=7000\n", []string{"10.0.0.1"}, "7000"},
		{"name only, default port", "ClusterName=c\nSlurmctldHost=head\n", []string{"head"}, "6817"},
		{"backup", "SlurmctldHost=a\nSlurmctldHost=b(192.0.2.2)\n", []string{"a", "192.0.2.2"}, "6817"},
		{"case and spaces, comment", "slurmctldhost = head # primary\nSLURMCTLDPORT=6817-6818\n", []string{"head"}, "6817-6818"},
		{"old keys", "ControlMachine=old\nControlAddr=198.51.100.1\n", []string{"198.51.100.1"}, "6817"},
		{"none", "ClusterName=c\n", nil, "6817"},
		{"empty", "SlurmctldHost=\nSlurmctldHost=()\n", nil, "6817"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hosts, port := controllerOf([]byte(tc.conf))
			if strings.Join(hosts, ",") != strings.Join(tc.hosts, ",") || port != tc.port {
				t.Fatalf("controllerOf = %v, %s; want %v, %s", hosts, port, tc.hosts, tc.port)
			}
		})
	}
}

// FuzzControllerOf: any slurm.conf is read without a panic, and every host
// found is non-empty.
func FuzzControllerOf(f *testing.F) {
	f.Add("SlurmctldHost=ctl(127.0.0.1)\nSlurmctldPort=6817\n")
	f.Add("SlurmctldHost=()\nControlMachine=\n")
	f.Fuzz(func(t *testing.T, conf string) {
		hosts, port := controllerOf([]byte(conf))
		if port == "" && !strings.Contains(strings.ToLower(conf), "slurmctldport") {
			t.Fatalf("no port from %q", conf)
		}
		for _, h := range hosts {
			if h == "" {
				t.Fatalf("an empty host from %q", conf)
			}
		}
	})
}
