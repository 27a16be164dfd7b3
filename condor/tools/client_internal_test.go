package tools

import (
	"testing"

	"github.com/pond-htc/pond/condor/wire"
)

// TestToolsWaitForABusyDaemonsHandshake: the tools' clients give a TLS
// handshake wire.ToolHandshakeTimeout, longer than a daemon's, so that a
// command run against a saturated central manager waits for it rather
// than fail.
func TestToolsWaitForABusyDaemonsHandshake(t *testing.T) {
	c, err := client("127.0.0.1:1", []string{"PWD=" + t.TempDir(), "POND_TOKEN=tok"})
	if err != nil {
		t.Fatal(err)
	}
	if c.HandshakeTimeout != wire.ToolHandshakeTimeout || c.HandshakeTimeout <= wire.DefaultHandshakeTimeout {
		t.Errorf("a tool's handshake timeout is %v, want %v (a daemon's: %v)", c.HandshakeTimeout, wire.ToolHandshakeTimeout, wire.DefaultHandshakeTimeout)
	}
}
