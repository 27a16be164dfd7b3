package factory

import "testing"

func TestGlideinCondorHost(t *testing.T) {
	for _, tt := range []struct{ cm, gossip, want string }{
		{"10.0.0.1:9000", "10.0.0.2:7946", "10.0.0.1:9000"},
		{"[::]:9000", "10.0.0.2:7946", "10.0.0.2:9000"},
		{"0.0.0.0:9000", "10.0.0.2:7946", "10.0.0.2:9000"},
		{"0.0.0.0:9000", "0.0.0.0:7946", "0.0.0.0:9000"},
		{"0.0.0.0:9000", "", "0.0.0.0:9000"},
	} {
		if got := GlideinCondorHost(tt.cm, tt.gossip); got != tt.want {
			t.Errorf("GlideinCondorHost(%q, %q) = %q, want %q", tt.cm, tt.gossip, got, tt.want)
		}
	}
}
