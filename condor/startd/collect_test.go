package startd

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/internal/asuser"
	"github.com/pond-htc/pond/condor/testenv"
	"github.com/pond-htc/pond/condor/wire"
)

// scratch is a job's scratch directory after the job ran, with a secret
// next to it that the job must not be able to have transferred back.
func scratch(t *testing.T) (dir, secret string) {
	t.Helper()
	base := t.TempDir()
	secret = filepath.Join(base, "shadow")
	dir = filepath.Join(base, "dir_slot1_1_0")
	for _, err := range []error{
		os.WriteFile(secret, []byte("root:secret"), 0o600),
		os.Mkdir(dir, 0o755),
		os.WriteFile(filepath.Join(dir, "_condor_stdout"), []byte("out"), 0o644),
		os.WriteFile(filepath.Join(dir, "_condor_stderr"), nil, 0o644),
		os.WriteFile(filepath.Join(dir, "result"), []byte("result"), 0o644),
		os.Mkdir(filepath.Join(dir, "sub"), 0o755),
		os.WriteFile(filepath.Join(dir, "sub", "deep"), []byte("deep"), 0o644),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	return dir, secret
}

func collect(t *testing.T, dir, transferOutput string) (*collected, error) {
	t.Helper()
	job := classad.NewAd()
	job.SetString("Out", "out")
	job.SetString("Err", "err")
	if transferOutput != "" {
		job.SetString("TransferOutput", transferOutput)
	}
	report := &collected{}
	return report, collectOutput(dir, job, &wire.ActivateRequest{}, report)
}

// collected is what a job sends back, read whole.
type collected struct {
	Stdout, Stderr []byte
	Files          map[string][]byte
}

// collectOutput reads the job's outputs as sendOutputs sends them.
func collectOutput(dir string, job *classad.Ad, req *wire.ActivateRequest, c *collected) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	outs, err := outputs(dir, job, req, nil)
	if err != nil {
		return err
	}
	c.Files = map[string][]byte{}
	for _, o := range outs {
		f, err := o.open(root)
		if o.scanned && errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		b, err := io.ReadAll(f)
		f.Close()
		if err != nil {
			return err
		}
		switch o.hdr.Stream {
		case wire.StreamStdout:
			c.Stdout = b
		case wire.StreamStderr:
			c.Stderr = b
		default:
			c.Files[o.hdr.Name] = b
		}
	}
	return nil
}

func TestCollectOutputStaysInScratch(t *testing.T) {
	tests := []struct {
		name    string
		prepare func(dir, secret string) error
		list    string
		want    string // in the error, "" for none
	}{
		{"plain files", nil, "result, sub/deep", ""},
		{"absolute path inside", nil, "$DIR/result", ""},
		{"link inside", func(dir, _ string) error { return os.Symlink("result", filepath.Join(dir, "link")) }, "link", ""},
		{"absolute link out", func(dir, secret string) error { return os.Symlink(secret, filepath.Join(dir, "link")) },
			"link", "output file link failed: link is a symbolic link that leads out of"},
		{"relative link out", func(dir, _ string) error { return os.Symlink("../shadow", filepath.Join(dir, "link")) },
			"link", "link is a symbolic link that leads out of"},
		{"directory link out", func(dir, _ string) error { return os.Symlink("..", filepath.Join(dir, "up")) },
			"up/shadow", "up/shadow leads out of"},
		{"dot dot", nil, "../shadow", "../shadow leads out of"},
		{"absolute path out", nil, "$SECRET", "leads out of"},
		{"fifo", func(dir, _ string) error { return syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644) },
			"fifo", "fifo is a special file"},
		{"directory", nil, "sub", "sub is a directory"},
		{"stdout link", func(dir, secret string) error {
			p := filepath.Join(dir, "_condor_stdout")
			return errorsJoin(os.Remove(p), os.Symlink(secret, p))
		}, "result", "reading job stdout: _condor_stdout is a symbolic link that leads out of"},
		{"stderr fifo", func(dir, _ string) error {
			p := filepath.Join(dir, "_condor_stderr")
			return errorsJoin(os.Remove(p), syscall.Mkfifo(p, 0o644))
		}, "result", "reading job stderr: _condor_stderr is a special file"},
		{"link out, no list", func(dir, secret string) error { return os.Symlink(secret, filepath.Join(dir, "link")) }, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir, secret := scratch(t)
			if tt.prepare != nil {
				if err := tt.prepare(dir, secret); err != nil {
					t.Fatal(err)
				}
			}
			list := strings.NewReplacer("$DIR", dir, "$SECRET", secret).Replace(tt.list)
			report, err := collect(t, dir, list)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("collectOutput: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("collectOutput: %v, want an error with %q", err, tt.want)
			}
			for name, b := range report.Files {
				if strings.Contains(string(b), "secret") {
					t.Errorf("the secret was collected as %s", name)
				}
			}
			if strings.Contains(string(report.Stdout)+string(report.Stderr), "secret") {
				t.Error("the secret was collected as the job's stdout or stderr")
			}
		})
	}
}

func errorsJoin(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// TestCollectOutputAsTheJobUser: a file the job user may not read in its
// scratch directory, as a hard link to a root-only file would be, is not
// transferred by a startd that reads outputs as the job user.
func TestCollectOutputAsTheJobUser(t *testing.T) {
	testenv.NeedRoot(t, "reading outputs as the job user needs root")
	base, err := os.MkdirTemp("", "collect")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	ju := &jobUser{cred: &syscall.Credential{Uid: 61178, Gid: 61178, Groups: []uint32{}}}
	dir := filepath.Join(base, "dir_slot1_1_0")
	for _, err := range []error{
		os.Chmod(base, 0o711),
		os.Mkdir(dir, 0o700),
		os.WriteFile(filepath.Join(dir, "_condor_stdout"), []byte("out"), 0o644),
		os.WriteFile(filepath.Join(dir, "_condor_stderr"), nil, 0o644),
		os.WriteFile(filepath.Join(dir, "result"), []byte("result"), 0o644),
		chownTree(dir, 61178, 61178),
		// Root's, as a hard link to /etc/shadow would be.
		os.WriteFile(filepath.Join(dir, "linked"), []byte("root:secret"), 0o600),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, tt := range []struct {
		transfer string
		want     string
	}{
		{"result", ""},
		{"linked", "transfer of output file linked failed: openat linked: permission denied"},
		{"", "reading output file linked: openat linked: permission denied"},
	} {
		job := classad.NewAd()
		if tt.transfer != "" {
			job.SetString("TransferOutput", tt.transfer)
		}
		report := &collected{}
		err := asuser.Do(ju.account(), func() error { return collectOutput(dir, job, &wire.ActivateRequest{}, report) })
		switch {
		case tt.want == "" && (err != nil || string(report.Files["result"]) != "result"):
			t.Errorf("transfer %q: %v, files %q", tt.transfer, err, report.Files)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("transfer %q: %v, want an error with %q", tt.transfer, err, tt.want)
		}
		if strings.Contains(string(report.Files["linked"]), "secret") {
			t.Errorf("transfer %q: the root-only file was transferred", tt.transfer)
		}
	}
}
