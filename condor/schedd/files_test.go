package schedd

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/pond-htc/pond/condor/classad"
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
			err := writeOutputs(jobAd(t, dir, tt.attrs), &wire.JobReport{Stdout: []byte("out"), Stderr: []byte("err"), Files: tt.files})
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
			files, err := inputFiles(jobAd(t, dir, tt.attrs))
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
