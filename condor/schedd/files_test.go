package schedd

import (
	"errors"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/internal/asuser"
	"github.com/pond-htc/pond/condor/testenv"
	"github.com/pond-htc/pond/condor/wire"
)

// iwd is a job's initial directory with a secret next to it and links out
// of it.
func iwd(t *testing.T) (dir, secret string) {
	t.Helper()
	base := t.TempDir()
	secret = filepath.Join(base, "secret")
	dir = filepath.Join(base, "iwd")
	for _, err := range []error{
		os.WriteFile(secret, []byte("secret"), 0o600),
		os.Mkdir(dir, 0o755),
		os.Mkdir(filepath.Join(dir, "sub"), 0o755),
		os.WriteFile(filepath.Join(dir, "in.txt"), []byte("input"), 0o644),
		os.Symlink(secret, filepath.Join(dir, "abs")),
		os.Symlink("../secret", filepath.Join(dir, "rel")),
		os.Symlink("..", filepath.Join(dir, "up")),
		os.Symlink("in.txt", filepath.Join(dir, "inside")),
		syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	return dir, secret
}

func jobAd(t *testing.T, dir string, attrs map[string]string) *classad.Ad {
	t.Helper()
	ad := classad.NewAd()
	ad.SetString("Iwd", dir)
	ad.SetBool("TransferExecutable", false)
	for k, v := range attrs {
		ad.SetString(k, strings.ReplaceAll(v, "$IWD", dir))
	}
	return ad
}

func TestWriteOutputsStaysInIwd(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		attrs map[string]string
		files map[string][]byte
		want  string // in the error, "" for none
	}{
		{"plain", map[string]string{"Out": "out.txt", "Err": "sub/err.txt"}, map[string][]byte{"result": []byte("r")}, ""},
		{"absolute", map[string]string{"Out": "$IWD/out.txt"}, nil, ""},
		{"link inside", map[string]string{"Out": "inside"}, nil, ""},
		{"stdout link out", map[string]string{"Out": "abs"}, nil, "writing Out: abs is a symbolic link that leads out of"},
		{"stderr relative link out", map[string]string{"Err": "rel"}, nil, "writing Err: rel is a symbolic link that leads out of"},
		{"through a directory link", map[string]string{"Out": "up/secret"}, nil, "up/secret leads out of"},
		{"dot dot", map[string]string{"Out": "../secret"}, nil, "../secret leads out of"},
		{"output file link out", nil, map[string][]byte{"abs": []byte("x")}, "writing output file abs: abs is a symbolic link"},
		{"remapped out", map[string]string{"TransferOutputRemaps": "result=rel"}, map[string][]byte{"result": []byte("x")},
			"writing output file result: rel is a symbolic link"},
		{"absolute final link", map[string]string{"Out": "$IWD/abs"}, nil, "abs is a symbolic link, not written through"},
		{"fifo", map[string]string{"Out": "fifo"}, nil, "fifo is a special file"},
		{"directory", map[string]string{"Out": "sub"}, nil, "sub is a directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir, secret := iwd(t)
			err := writeOutputs(jobAd(t, dir, tt.attrs), testOutputs{stdout: []byte("out"), stderr: []byte("err"), files: tt.files}, nil)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("writeOutputs: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("writeOutputs: %v, want an error with %q", err, tt.want)
			}
			if b, _ := os.ReadFile(secret); string(b) != "secret" {
				t.Errorf("the file outside the Iwd was written: %q", b)
			}
		})
	}
}

func TestInputFilesStayInIwd(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		attrs map[string]string
		want  string // in the error, "" for none
	}{
		{"plain", map[string]string{"In": "in.txt", "TransferInput": "inside, $IWD/in.txt"}, ""},
		{"absolute link", map[string]string{"TransferInput": "$IWD/abs"}, ""},
		{"link out", map[string]string{"TransferInput": "abs"}, "transfer input file abs: abs is a symbolic link that leads out of"},
		{"relative link out", map[string]string{"In": "rel"}, "reading input: rel is a symbolic link that leads out of"},
		{"through a directory link", map[string]string{"TransferInput": "up/secret"}, "up/secret leads out of"},
		{"dot dot", map[string]string{"TransferInput": "../secret"}, "../secret leads out of"},
		{"fifo", map[string]string{"TransferInput": "fifo"}, "fifo is a special file"},
		{"absolute fifo", map[string]string{"TransferInput": "$IWD/fifo"}, "fifo is a special file"},
		{"directory", map[string]string{"TransferInput": "sub"}, "sub is a directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir, _ := iwd(t)
			files, err := readInputs(jobAd(t, dir, tt.attrs), nil)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("inputFiles: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("inputFiles: %v, want an error with %q", err, tt.want)
			}
			if tt.want == "" {
				for name, b := range files {
					if name != "abs" && string(b) != "input" {
						t.Errorf("%s = %q", name, b)
					}
				}
			}
		})
	}
}

// TestFilesUseTheOwnersRights reads and writes a job's files as its owner
// (here nobody), as a schedd that runs as root does: what the owner may not
// read or write is refused, and what it writes is its own.
func TestFilesUseTheOwnersRights(t *testing.T) {
	t.Parallel()
	testenv.NeedRoot(t, "acting as the job's owner needs root")
	acct, err := asuser.Lookup("nobody")
	if err != nil {
		testenv.SkipOrFailf(t, "no user nobody: %v", err)
	}
	base, err := os.MkdirTemp("", "owner")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	secret := filepath.Join(base, "secret")
	mine := filepath.Join(base, "mine")       // the owner's Iwd
	private := filepath.Join(base, "private") // root's, 0700
	for _, err := range []error{
		os.Chmod(base, 0o755),
		os.WriteFile(secret, []byte("secret"), 0o600),
		os.Mkdir(mine, 0o755),
		os.Chown(mine, int(acct.UID), int(acct.GID)),
		os.Mkdir(private, 0o700),
		os.WriteFile(filepath.Join(private, "in.txt"), []byte("private"), 0o644),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Run("inputs", func(t *testing.T) {
		for _, tt := range []struct {
			name, iwd string
			attrs     map[string]string
			want      string
		}{
			{"a root-only input", mine, map[string]string{"TransferInput": secret}, "transfer input file " + secret + " as nobody: open " + secret + ": permission denied"},
			{"a root-only stdin", mine, map[string]string{"In": secret}, "reading input as nobody"},
			{"an Iwd the owner cannot read", private, map[string]string{"TransferInput": "in.txt"}, "opening the job's initial directory as nobody"},
			{"an Iwd the owner cannot read, no relative name", private, map[string]string{"TransferInput": "/etc/hostname"}, "opening the job's initial directory as nobody"},
		} {
			t.Run(tt.name, func(t *testing.T) {
				_, err := readInputs(jobAd(t, tt.iwd, tt.attrs), acct)
				if err == nil || !strings.Contains(err.Error(), tt.want) || !errors.Is(err, os.ErrPermission) {
					t.Fatalf("inputFiles: %v, want a permission error with %q", err, tt.want)
				}
			})
		}
	})
	t.Run("outputs", func(t *testing.T) {
		for _, tt := range []struct {
			name, iwd string
			attrs     map[string]string
			want      string
		}{
			{"stdout over a root-only file", mine, map[string]string{"Out": secret}, "writing Out as nobody"},
			{"stderr into root's directory", mine, map[string]string{"Err": filepath.Join(private, "err")}, "writing Err as nobody"},
			{"an Iwd the owner cannot write", private, map[string]string{"Out": "out"}, "as nobody"},
		} {
			t.Run(tt.name, func(t *testing.T) {
				err := writeOutputs(jobAd(t, tt.iwd, tt.attrs), testOutputs{stdout: []byte("out"), stderr: []byte("err")}, acct)
				if err == nil || !strings.Contains(err.Error(), tt.want) || !errors.Is(err, os.ErrPermission) {
					t.Fatalf("writeOutputs: %v, want a permission error with %q", err, tt.want)
				}
			})
		}
		if b, _ := os.ReadFile(secret); string(b) != "secret" {
			t.Errorf("the root-only file was written: %q", b)
		}
		if _, err := os.Stat(filepath.Join(private, "err")); err == nil {
			t.Error("a file was made in root's directory")
		}
	})
	t.Run("the owner's files are the owner's", func(t *testing.T) {
		ad := jobAd(t, mine, map[string]string{"Out": "out.txt"})
		if err := writeOutputs(ad, testOutputs{stdout: []byte("out"), files: map[string][]byte{"result": []byte("r")}}, acct); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"out.txt", "result"} {
			var st syscall.Stat_t
			if err := syscall.Stat(filepath.Join(mine, name), &st); err != nil {
				t.Fatal(err)
			}
			if st.Uid != acct.UID {
				t.Errorf("%s is owned by uid %d, want %d", name, st.Uid, acct.UID)
			}
		}
	})
}

func TestJobAccount(t *testing.T) {
	t.Parallel()
	ad := classad.NewAd()
	ad.SetString("Owner", "no-such-owner-pond")
	if _, err := (&Schedd{asRoot: true, accounts: asuser.NewCache(asuser.Lookup, 0, nil)}).jobAccount(ad); err == nil || !strings.Contains(err.Error(), `the job's owner "no-such-owner-pond" has no account on this machine`) {
		t.Errorf("a root schedd, an owner without an account: %v", err)
	}
	if acct, err := (&Schedd{asRoot: false}).jobAccount(ad); acct != nil || err != nil {
		t.Errorf("a schedd that is not root acts as itself, got %v, %v", acct, err)
	}
}

// testOutputs are a job's outputs as a starter sends them.
type testOutputs struct {
	stdout, stderr []byte
	files          map[string][]byte
}

// writeOutputs stores outputs as the schedd does when they arrive and the
// final report comes: each staged next to where it goes, then put in
// place.
func writeOutputs(ad *classad.Ad, outs testOutputs, acct *asuser.Account) error {
	var staged []*stagedOut
	defer func() {
		for _, o := range staged {
			o.discard()
		}
	}()
	put := func(hdr wire.TransferHeader, data []byte) error {
		o, f, err := stageOutput(ad, hdr, acct, nil, "claim-test")
		if err != nil {
			return err
		}
		if f != nil {
			_, err = f.Write(data)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		staged = append(staged, o)
		return err
	}
	if err := put(wire.TransferHeader{Stream: wire.StreamStdout}, outs.stdout); err != nil {
		return err
	}
	if err := put(wire.TransferHeader{Stream: wire.StreamStderr}, outs.stderr); err != nil {
		return err
	}
	names := slices.Sorted(maps.Keys(outs.files))
	for _, name := range names {
		if err := put(wire.TransferHeader{Name: name}, outs.files[name]); err != nil {
			return err
		}
	}
	for _, o := range staged {
		if err := o.commit(); err != nil {
			return err
		}
	}
	staged = nil
	return nil
}

// readInputs reads the input files of a job as the schedd sends them.
func readInputs(job *classad.Ad, acct *asuser.Account) (map[string][]byte, error) {
	in, err := inputFiles(job, acct, nil)
	if err != nil {
		return nil, err
	}
	defer in.Close()
	files := map[string][]byte{}
	for _, src := range in.files {
		f, err := src.open()
		if err != nil {
			return nil, err
		}
		b, err := io.ReadAll(f)
		f.Close()
		if err != nil {
			return nil, err
		}
		files[src.name] = b
	}
	return files, nil
}

// TestStageOutputRemovesItsClaimsStaleCopies: the temporary files an
// output left under the same claim (a schedd restarted before the final
// report put them in place) go when the output arrives again; those of
// another claim stay.
func TestStageOutputRemovesItsClaimsStaleCopies(t *testing.T) {
	t.Parallel()
	dir, _ := iwd(t)
	stale := filepath.Join(dir, ".out.txt.pond-claim-te-0123456789ab.partial")
	other := filepath.Join(dir, ".out.txt.pond-otherclm-0123456789ab.partial")
	for _, p := range []string{stale, other} {
		if err := os.WriteFile(p, []byte("half"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := writeOutputs(jobAd(t, dir, map[string]string{"Out": "out.txt"}), testOutputs{stdout: []byte("whole")}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the claim's stale copy is still there: %v", err)
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("another claim's copy is gone: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "out.txt")); err != nil || string(b) != "whole" {
		t.Errorf("out.txt = %q, %v", b, err)
	}
}
