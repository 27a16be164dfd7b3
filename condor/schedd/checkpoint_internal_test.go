package schedd

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pond-htc/pond/condor/config"
	"github.com/pond-htc/pond/condor/jobqueue"
	"github.com/pond-htc/pond/condor/wire"
)

// stream is a whole transfer stream of data named name.
func stream(t *testing.T, name string, data []byte, cut bool) *wire.TransferReader {
	t.Helper()
	var b bytes.Buffer
	tw, err := wire.NewTransferWriter(&b, wire.TransferHeader{Name: name, Checkpoint: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write(data); err != nil {
		t.Fatal(err)
	}
	if !cut {
		if _, err := tw.End(); err != nil {
			t.Fatal(err)
		}
	}
	tr, err := wire.NewTransferReader(&b, nil)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func newTestSpool(t *testing.T, dir string, maxMB string) *ckptSpool {
	t.Helper()
	cfg := config.New(config.Options{})
	if maxMB != "" {
		if err := cfg.Set("SCHEDD_MAX_CHECKPOINT_MB", maxMB); err != nil {
			t.Fatal(err)
		}
	}
	sp, err := newCkptSpool(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return sp
}

// keep receives and commits checkpoint n of job id with files.
func keep(t *testing.T, sp *ckptSpool, id jobqueue.JobID, n int64, files map[string]string) {
	t.Helper()
	key := ckptKey{claim: "claim-1234567890", job: id, n: n}
	w, err := sp.begin(key)
	if err != nil {
		t.Fatal(err)
	}
	var infos []wire.FileInfo
	for name, data := range files {
		info, err := sp.receive(w, name, stream(t, name, []byte(data), false), func() {}, func() {})
		if err != nil {
			t.Fatal(err)
		}
		infos = append(infos, info)
	}
	if err := sp.commit(key, infos); err != nil {
		t.Fatal(err)
	}
}

func checkLatest(t *testing.T, sp *ckptSpool, id jobqueue.JobID, n int64, want map[string]string) {
	t.Helper()
	got, dir, names := sp.latest(id)
	if got != n || len(names) != len(want) {
		t.Fatalf("latest checkpoint %d with %v, want %d with %d files", got, names, n, len(want))
	}
	for name, data := range want {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || string(b) != data {
			t.Fatalf("checkpoint %d file %s = %q, %v; want %q", n, name, b, err, data)
		}
	}
}

// TestCheckpointSpoolSwitch: a new checkpoint replaces the job's previous
// one only once it is whole. A transfer cut short, a checkpoint missing
// a file, one over SCHEDD_MAX_CHECKPOINT_MB and a schedd that stops (a
// crash) while a checkpoint arrives all leave the previous checkpoint as
// it was, and the job resumes from it; a complete one replaces it and
// the spool keeps only the latest.
func TestCheckpointSpoolSwitch(t *testing.T) {
	t.Parallel()
	id := jobqueue.JobID{Cluster: 7, Proc: 0}
	first := map[string]string{"state": "4", "_condor_stdout": "step 1\nstep 2\n"}
	for _, tc := range []struct {
		name  string
		maxMB string
		fail  func(t *testing.T, sp *ckptSpool) *ckptSpool
	}{
		{"crash while a file arrives", "", func(t *testing.T, sp *ckptSpool) *ckptSpool {
			w, err := sp.begin(ckptKey{claim: "claim-abcdefgh", job: id, n: 2})
			if err != nil {
				t.Fatal(err)
			}
			// Half a file on disk, then the schedd dies: a new one
			// opens the same spool.
			if err := os.WriteFile(filepath.Join(w.dir, "state"), []byte("9"), 0o600); err != nil {
				t.Fatal(err)
			}
			return newTestSpool(t, filepath.Dir(sp.dir), "")
		}},
		{"stream cut short", "", func(t *testing.T, sp *ckptSpool) *ckptSpool {
			key := ckptKey{claim: "claim-abcdefgh", job: id, n: 2}
			w, err := sp.begin(key)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := sp.receive(w, "state", stream(t, "state", []byte("9"), true), func() {}, func() {}); err == nil {
				t.Fatal("a stream cut short was received")
			}
			if err := sp.commit(key, []wire.FileInfo{{Name: "state", Size: 1}}); !errors.Is(err, wire.ErrResend) {
				t.Fatalf("commit of a checkpoint missing a file: %v, want ErrResend", err)
			}
			return sp
		}},
		{"over the size limit", "1", func(t *testing.T, sp *ckptSpool) *ckptSpool {
			key := ckptKey{claim: "claim-abcdefgh", job: id, n: 2}
			w, err := sp.begin(key)
			if err != nil {
				t.Fatal(err)
			}
			aborted := false
			big := bytes.Repeat([]byte("x"), 1<<20+1)
			_, err = sp.receive(w, "state", stream(t, "state", big, false), func() { aborted = true }, func() {})
			if err == nil || !aborted || !strings.Contains(err.Error(), "SCHEDD_MAX_CHECKPOINT_MB") {
				t.Fatalf("a checkpoint over the limit: %v (aborted %v)", err, aborted)
			}
			if err := sp.commit(key, nil); !errors.Is(err, wire.ErrBadRequest) {
				t.Fatalf("commit of a checkpoint over the limit: %v, want ErrBadRequest", err)
			}
			return sp
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spool := t.TempDir()
			sp := newTestSpool(t, spool, tc.maxMB)
			keep(t, sp, id, 1, first)
			sp = tc.fail(t, sp)
			checkLatest(t, sp, id, 1, first)
			// The next checkpoint replaces it, and the spool keeps it alone.
			second := map[string]string{"state": "6"}
			keep(t, sp, id, 2, second)
			checkLatest(t, sp, id, 2, second)
			ents, _ := os.ReadDir(sp.jobDir(id))
			if len(ents) != 1 || ents[0].Name() != "2" {
				var names []string
				for _, e := range ents {
					names = append(names, e.Name())
				}
				t.Fatalf("the job's spool holds %v, want its latest checkpoint alone", names)
			}
			// An older checkpoint arriving late is refused.
			if _, err := sp.begin(ckptKey{claim: "claim-old", job: id, n: 1}); !errors.Is(err, wire.ErrConflict) {
				t.Fatalf("an older checkpoint: %v, want ErrConflict", err)
			}
			sp.remove(id)
			if n, _, _ := sp.latest(id); n != 0 {
				t.Fatalf("checkpoint %d left after the job's removal", n)
			}
		})
	}
}
