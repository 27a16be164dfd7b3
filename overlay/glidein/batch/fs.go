package batch

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pond-htc/pond/overlay/glidein/remote"
)

// FS is a site's work directory, where its batch system's commands run:
// this machine's (NewLocalFS) or a login node's (NewRemoteFS). Every
// path is absolute, under the work directory.
type FS interface {
	// RanAlready returns the path of a file of dir matching pattern (a
	// job's output, "slurm-*.out"), or "" when there is none.
	RanAlready(ctx context.Context, dir, pattern string) (string, error)
	// WriteDir makes dir (0700, its parents too) and writes files into
	// it (0600).
	WriteDir(ctx context.Context, dir string, files map[string][]byte) error
	// WriteFile writes one file (0600).
	WriteFile(ctx context.Context, path string, data []byte) error
	// ReplaceFiles replaces files of the existing directory dir, each
	// through a rename; ErrNoDir when dir is not there.
	ReplaceFiles(ctx context.Context, dir string, files map[string][]byte) error
	// RemoveAll removes dir and what it holds.
	RemoveAll(ctx context.Context, dir string) error
	// ReadFile reads at most limit+1 bytes of a regular file.
	ReadFile(ctx context.Context, path string, limit int64) ([]byte, error)
	// InstallBinary copies the local binary at path into WORK_DIR/bin,
	// named pondctl-SHA256, unless it is there, and returns its path.
	InstallBinary(ctx context.Context, path string) (string, error)
	// CheckWorkDir makes the work directory and writes a file into it.
	CheckWorkDir(ctx context.Context) error
	// TempDir makes a new directory under the work directory.
	TempDir(ctx context.Context) (string, error)
	// User returns the numeric ID and the name of the user the batch
	// system's commands run as.
	User(ctx context.Context) (uid, name string, err error)
}

// ErrNoDir is ReplaceFiles' error for a directory that is not there.
var ErrNoDir = errors.New("no such glidein directory")

// NewLocalFS is the work directory workDir on this machine.
func NewLocalFS(workDir string) FS { return &localFS{workDir: workDir} }

// localFS is the work directory on this machine.
type localFS struct {
	workDir string
	sums    checksums
}

func (l *localFS) RanAlready(_ context.Context, dir, pattern string) (string, error) {
	outs, _ := filepath.Glob(filepath.Join(dir, pattern))
	if len(outs) > 0 {
		return outs[0], nil
	}
	return "", nil
}

func (l *localFS) WriteDir(_ context.Context, dir string, files map[string][]byte) error {
	return writeDir(dir, files)
}

func (l *localFS) WriteFile(_ context.Context, path string, data []byte) error {
	return writeFile(path, data)
}

func (l *localFS) ReplaceFiles(_ context.Context, dir string, files map[string][]byte) error {
	if _, err := os.Stat(dir); err != nil {
		return ErrNoDir
	}
	for _, n := range sortedNames(files) {
		tmp := filepath.Join(dir, "."+n+".new")
		if err := writeFile(tmp, files[n]); err != nil {
			return err
		}
		if err := os.Rename(tmp, filepath.Join(dir, n)); err != nil {
			os.Remove(tmp)
			return err
		}
	}
	return nil
}

func (l *localFS) RemoveAll(_ context.Context, dir string) error { return os.RemoveAll(dir) }

func (l *localFS) ReadFile(_ context.Context, path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", path)
	}
	return io.ReadAll(io.LimitReader(f, limit+1))
}

func (l *localFS) CheckWorkDir(context.Context) error {
	if err := os.MkdirAll(l.workDir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(l.workDir, ".check-*")
	if err != nil {
		return err
	}
	f.Close()
	return os.Remove(f.Name())
}

func (l *localFS) TempDir(context.Context) (string, error) {
	return os.MkdirTemp(l.workDir, ".check-*")
}

func (l *localFS) User(context.Context) (string, string, error) {
	u, err := user.Current()
	if err != nil {
		return "", "", err
	}
	return strconv.Itoa(os.Getuid()), u.Username, nil
}

// writeDir makes the glidein's directory, 0700, and writes its files, 0600.
func writeDir(dir string, files map[string][]byte) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return fmt.Errorf("work_dir: %w", err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return err
	}
	for name, data := range files {
		if err := writeFile(filepath.Join(dir, name), data); err != nil {
			return err
		}
	}
	return nil
}

// writeFile writes a file readable by its owner only.
func writeFile(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// InstallBinary copies the binary to WorkDir/bin/pondctl-SHA256 unless it
// is there, and returns that path.
func (l *localFS) InstallBinary(_ context.Context, path string) (string, error) {
	sum, err := l.sums.get(path)
	if err != nil {
		return "", fmt.Errorf("binary: %w", err)
	}
	binDir := filepath.Join(l.workDir, "bin")
	dst := filepath.Join(binDir, "pondctl-"+sum)
	if st, err := os.Stat(dst); err == nil && st.Mode().IsRegular() {
		return dst, nil
	}
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return "", fmt.Errorf("work_dir: %w", err)
	}
	src, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("binary: %w", err)
	}
	defer src.Close()
	tmp, err := os.CreateTemp(binDir, ".pondctl-*")
	if err != nil {
		return "", fmt.Errorf("work_dir: %w", err)
	}
	defer os.Remove(tmp.Name())
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(tmp, h), src); err != nil {
		tmp.Close()
		return "", fmt.Errorf("copying the binary to %s: %w", binDir, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != sum {
		tmp.Close()
		return "", fmt.Errorf("binary %s changed while it was copied", path)
	}
	if err := tmp.Chmod(0o755); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return "", fmt.Errorf("work_dir: %w", err)
	}
	return dst, nil
}

// checksums remembers the SHA-256 of files by path, while their size and
// modification time stay.
type checksums struct {
	mu   sync.Mutex
	sums map[string]fileHash
}

type fileHash struct {
	size  int64
	mtime time.Time
	sum   string
}

// get is the SHA-256 of the file, in hex.
func (c *checksums) get(path string) (string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	if !st.Mode().IsRegular() {
		return "", fmt.Errorf("%s is not a regular file", path)
	}
	c.mu.Lock()
	h, ok := c.sums[path]
	c.mu.Unlock()
	if ok && h.size == st.Size() && h.mtime.Equal(st.ModTime()) {
		return h.sum, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	sh := sha256.New()
	if _, err := io.Copy(sh, f); err != nil {
		return "", err
	}
	sum := hex.EncodeToString(sh.Sum(nil))
	c.mu.Lock()
	if c.sums == nil {
		c.sums = map[string]fileHash{}
	}
	c.sums[path] = fileHash{size: st.Size(), mtime: st.ModTime(), sum: sum}
	c.mu.Unlock()
	return sum, nil
}

// NewRemoteFS is the work directory workDir of the login node r runs
// commands on.
func NewRemoteFS(workDir string, r remote.Runner) FS {
	return &remoteFS{workDir: workDir, r: r, verified: map[string]string{}}
}

// remoteFS is the work directory on the login node, handled by small
// shell scripts (POSIX sh, coreutils) in sessions of the connection.
type remoteFS struct {
	workDir string
	r       remote.Runner
	sums    checksums

	mu       sync.Mutex
	verified map[string]string // remote binary paths checked, by checksum
	uid, who string
}

// script runs a POSIX sh script with args on the login node.
func (f *remoteFS) script(ctx context.Context, what, script string, stdin io.Reader, args ...string) ([]byte, error) {
	out, stderr, err := f.r.Run(ctx, remote.Cmd{Path: "/bin/sh", Args: append([]string{"-c", script, "sh"}, args...), Stdin: stdin})
	if err != nil {
		if msg := strings.TrimSpace(string(stderr)); msg != "" {
			return out, fmt.Errorf("%s: %w: %s", what, err, msg)
		}
		return out, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

func (f *remoteFS) RanAlready(ctx context.Context, dir, pattern string) (string, error) {
	out, err := f.script(ctx, "looking for "+dir+"/"+pattern,
		`for o in "$1"/$2; do if [ -e "$o" ]; then printf '%s\n' "$o"; exit 0; fi; done`, nil, dir, pattern)
	return strings.TrimSpace(string(out)), err
}

// makeDirScript: DIR. Makes DIR, 0700, and its parents.
const makeDirScript = `umask 077; mkdir -p -- "$1" && chmod 700 -- "$1"`

// putScript: PATH. Writes standard input to PATH, 0600, through a rename.
const putScript = `umask 077; t="${1%/*}/.${1##*/}.new" && cat > "$t" && chmod 600 -- "$t" && mv -f -- "$t" "$1"`

func (f *remoteFS) WriteDir(ctx context.Context, dir string, files map[string][]byte) error {
	if _, err := f.script(ctx, "making "+dir, makeDirScript, nil, dir); err != nil {
		return err
	}
	for _, n := range sortedNames(files) {
		if err := f.WriteFile(ctx, path.Join(dir, n), files[n]); err != nil {
			return err
		}
	}
	return nil
}

func (f *remoteFS) WriteFile(ctx context.Context, p string, data []byte) error {
	_, err := f.script(ctx, "writing "+p, putScript, bytes.NewReader(data), p)
	return err
}

func (f *remoteFS) ReplaceFiles(ctx context.Context, dir string, files map[string][]byte) error {
	out, err := f.script(ctx, "looking for "+dir, `[ -d "$1" ] && echo present || echo absent`, nil, dir)
	if err != nil {
		return err
	}
	if strings.TrimSpace(string(out)) != "present" {
		return ErrNoDir
	}
	for _, n := range sortedNames(files) {
		if err := f.WriteFile(ctx, path.Join(dir, n), files[n]); err != nil {
			return err
		}
	}
	return nil
}

func (f *remoteFS) RemoveAll(ctx context.Context, dir string) error {
	_, err := f.script(ctx, "removing "+dir, `rm -rf -- "$1"`, nil, dir)
	return err
}

func (f *remoteFS) ReadFile(ctx context.Context, p string, limit int64) ([]byte, error) {
	out, err := f.script(ctx, "reading "+p, `[ -f "$1" ] || { echo "not a regular file" >&2; exit 3; }; head -c "$2" -- "$1"`, nil,
		p, strconv.FormatInt(limit+1, 10))
	if err != nil {
		return nil, err
	}
	return out, nil
}

// hasBinaryScript: PATH SUM. Prints "present" when the SHA-256 of the
// file PATH is SUM, else "absent".
const hasBinaryScript = `if [ -f "$1" ] && [ "$(sha256sum < "$1" | cut -d' ' -f1)" = "$2" ]; then echo present; else echo absent; fi`

// putBinaryScript: BINDIR NAME SUM. Writes standard input to BINDIR/NAME
// (0700, BINDIR 0700) through a rename once its SHA-256 is checked.
const putBinaryScript = `umask 077
d=$1 dst=$1/$2
mkdir -p -- "$d" && chmod 700 -- "$d" || { cat > /dev/null; exit 1; }
t=$(mktemp "$d/.pondctl-XXXXXX") || { cat > /dev/null; exit 1; }
cat > "$t" || { rm -f -- "$t"; exit 1; }
got=$(sha256sum < "$t" | cut -d' ' -f1)
if [ "$got" != "$3" ]; then rm -f -- "$t"; echo "the copy's SHA-256 is $got, not $3" >&2; exit 1; fi
chmod 700 -- "$t" && mv -f -- "$t" "$dst" && echo installed
`

// InstallBinary copies the binary to WorkDir/bin/pondctl-SHA256 on the
// login node, unless a file of that checksum is there: it is checked
// once by this site, then trusted.
func (f *remoteFS) InstallBinary(ctx context.Context, local string) (string, error) {
	sum, err := f.sums.get(local)
	if err != nil {
		return "", fmt.Errorf("binary: %w", err)
	}
	binDir := path.Join(f.workDir, "bin")
	dst := path.Join(binDir, "pondctl-"+sum)
	f.mu.Lock()
	_, ok := f.verified[sum]
	f.mu.Unlock()
	if ok {
		return dst, nil
	}
	out, err := f.script(ctx, "looking for the binary "+dst, hasBinaryScript, nil, dst, sum)
	if err != nil {
		return "", err
	}
	if strings.TrimSpace(string(out)) != "present" {
		src, err := os.Open(local)
		if err != nil {
			return "", fmt.Errorf("binary: %w", err)
		}
		defer src.Close()
		out, err := f.script(ctx, "copying the binary to "+binDir, putBinaryScript, src, binDir, "pondctl-"+sum, sum)
		if err != nil {
			return "", err
		}
		if strings.TrimSpace(string(out)) != "installed" {
			return "", fmt.Errorf("copying the binary to %s: the login node said %q", binDir, out)
		}
	}
	f.mu.Lock()
	f.verified[sum] = dst
	f.mu.Unlock()
	return dst, nil
}

func (f *remoteFS) CheckWorkDir(ctx context.Context) error {
	_, err := f.script(ctx, "writing into the work directory",
		`umask 077; mkdir -p -- "$1" && t=$(mktemp "$1/.check-XXXXXX") && rm -f -- "$t"`, nil, f.workDir)
	return err
}

func (f *remoteFS) TempDir(ctx context.Context) (string, error) {
	out, err := f.script(ctx, "making a directory in the work directory",
		`umask 077; mkdir -p -- "$1" && mktemp -d "$1/.check-XXXXXX"`, nil, f.workDir)
	if err != nil {
		return "", err
	}
	d := strings.TrimSpace(string(out))
	if !strings.HasPrefix(d, f.workDir+"/") {
		return "", fmt.Errorf("mktemp on the login node said %q", out)
	}
	return d, nil
}

func (f *remoteFS) User(ctx context.Context) (string, string, error) {
	f.mu.Lock()
	uid, who := f.uid, f.who
	f.mu.Unlock()
	if uid != "" {
		return uid, who, nil
	}
	out, err := f.script(ctx, "asking who logs in", `id -u && id -un`, nil)
	if err != nil {
		return "", "", err
	}
	fields := strings.Fields(string(out))
	if len(fields) != 2 {
		return "", "", fmt.Errorf("id on the login node said %q", out)
	}
	if _, err := strconv.ParseUint(fields[0], 10, 32); err != nil {
		return "", "", fmt.Errorf("id -u on the login node said %q", fields[0])
	}
	f.mu.Lock()
	f.uid, f.who = fields[0], fields[1]
	f.mu.Unlock()
	return fields[0], fields[1], nil
}

// sortedNames returns the names of files, sorted.
func sortedNames(files map[string][]byte) []string {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
