package startd

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/wire"
)

// TestReadOutput reads parts of a job's output in its scratch directory,
// and refuses what a job could point it at instead: a link out of the
// directory, a FIFO (which would make the read wait).
func TestReadOutput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "_condor_stdout"), []byte("0123456789"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name        string
		offset, max int64
		data        string
		at          int64
	}{
		{"from the start", 0, 4, "0123", 0},
		{"from an offset", 6, 100, "6789", 6},
		{"past the end", 20, 4, "", 10},
		{"the last bytes", -3, 100, "789", 7},
		{"more last bytes than there are", -30, 100, "0123456789", 0},
		{"the last bytes, bounded", -8, 2, "23", 2},
	} {
		out, err := readOutput(dir, wire.StreamStdout, tt.offset, tt.max)
		if err != nil || string(out.Data) != tt.data || out.Offset != tt.at || out.Size != 10 {
			t.Errorf("%s: %+v, %v; want %q at %d of 10", tt.name, out, err, tt.data, tt.at)
		}
	}
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("not the job's"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(dir, "_condor_stderr")); err != nil {
		t.Fatal(err)
	}
	if out, err := readOutput(dir, wire.StreamStderr, 0, 0); err == nil {
		t.Errorf("a link out of the scratch directory was read: %q", out.Data)
	}
	fifoDir := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(fifoDir, "_condor_stdout"), 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := readOutput(fifoDir, wire.StreamStdout, 0, 0)
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("a FIFO: %v, want it refused as not a regular file", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("reading a FIFO blocks")
	}
	if _, err := readOutput(dir, "stdin", 0, 0); err == nil {
		t.Error("an unknown stream was read")
	}
}
