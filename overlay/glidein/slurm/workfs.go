package slurm

import (
	"bytes"
	"context"
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

	"github.com/pond-htc/pond/overlay/glidein/remote"
)

// workFS is the work directory, where the Slurm commands run: this
// machine's (localFS) or the login node's (remoteFS). Every path is
// absolute, under Config.WorkDir.
type workFS interface {
	// ranAlready returns the path of an output file (slurm-*.out) in
	// dir, or "" when there is none.
	ranAlready(ctx context.Context, dir string) (string, error)
	// writeDir makes dir (0700, its parents too) and writes files into
	// it (0600).
	writeDir(ctx context.Context, dir string, files map[string][]byte) error
	// writeFile writes one file (0600).
	writeFile(ctx context.Context, path string, data []byte) error
	// replaceFiles replaces files of the existing directory dir, each
	// through a rename.
	replaceFiles(ctx context.Context, dir string, files map[string][]byte) error
	// removeAll removes dir and what it holds.
	removeAll(ctx context.Context, dir string) error
	// readFile reads at most limit+1 bytes of a regular file.
	readFile(ctx context.Context, path string, limit int64) ([]byte, error)
	// installBinary copies the local binary at path into WorkDir/bin,
	// named by its SHA-256, unless it is there, and returns its path.
	installBinary(ctx context.Context, path string) (string, error)
	// checkWorkDir makes the work directory and writes a file into it.
	checkWorkDir(ctx context.Context) error
	// tempDir makes a new directory under the work directory.
	tempDir(ctx context.Context) (string, error)
	// user returns the numeric ID and the name of the user the Slurm
	// commands run as.
	user(ctx context.Context) (uid, name string, err error)
}

// localFS is the work directory on this machine.
type localFS struct{ s *Site }

func (l localFS) ranAlready(_ context.Context, dir string) (string, error) {
	outs, _ := filepath.Glob(filepath.Join(dir, "slurm-*.out"))
	if len(outs) > 0 {
		return outs[0], nil
	}
	return "", nil
}

func (l localFS) writeDir(_ context.Context, dir string, files map[string][]byte) error {
	return writeDir(dir, files)
}

func (l localFS) writeFile(_ context.Context, path string, data []byte) error {
	return writeFile(path, data)
}

func (l localFS) replaceFiles(_ context.Context, dir string, files map[string][]byte) error {
	if _, err := os.Stat(dir); err != nil {
		return errNoDir
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

func (l localFS) removeAll(_ context.Context, dir string) error { return os.RemoveAll(dir) }

func (l localFS) readFile(_ context.Context, path string, limit int64) ([]byte, error) {
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

func (l localFS) installBinary(_ context.Context, path string) (string, error) {
	return l.s.installBinary(path)
}

func (l localFS) checkWorkDir(context.Context) error { return l.s.checkWorkDir() }

func (l localFS) tempDir(context.Context) (string, error) {
	return os.MkdirTemp(l.s.cfg.WorkDir, ".check-*")
}

func (l localFS) user(context.Context) (string, string, error) {
	u, err := user.Current()
	if err != nil {
		return "", "", err
	}
	return strconv.Itoa(os.Getuid()), u.Username, nil
}

// errNoDir is replaceFiles' error for a directory that is not there.
var errNoDir = errors.New("no such glidein directory")

// remoteFS is the work directory on the login node, handled by small
// shell scripts (POSIX sh, coreutils) in sessions of the connection.
type remoteFS struct {
	s *Site
	r remote.Runner

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

func (f *remoteFS) ranAlready(ctx context.Context, dir string) (string, error) {
	out, err := f.script(ctx, "looking for "+dir+"/slurm-*.out",
		`for o in "$1"/slurm-*.out; do if [ -e "$o" ]; then printf '%s\n' "$o"; exit 0; fi; done`, nil, dir)
	return strings.TrimSpace(string(out)), err
}

// makeDirScript: DIR. Makes DIR, 0700, and its parents.
const makeDirScript = `umask 077; mkdir -p -- "$1" && chmod 700 -- "$1"`

// putScript: PATH. Writes standard input to PATH, 0600, through a rename.
const putScript = `umask 077; t="${1%/*}/.${1##*/}.new" && cat > "$t" && chmod 600 -- "$t" && mv -f -- "$t" "$1"`

func (f *remoteFS) writeDir(ctx context.Context, dir string, files map[string][]byte) error {
	if _, err := f.script(ctx, "making "+dir, makeDirScript, nil, dir); err != nil {
		return err
	}
	for _, n := range sortedNames(files) {
		if err := f.writeFile(ctx, path.Join(dir, n), files[n]); err != nil {
			return err
		}
	}
	return nil
}

func (f *remoteFS) writeFile(ctx context.Context, p string, data []byte) error {
	_, err := f.script(ctx, "writing "+p, putScript, bytes.NewReader(data), p)
	return err
}

func (f *remoteFS) replaceFiles(ctx context.Context, dir string, files map[string][]byte) error {
	out, err := f.script(ctx, "looking for "+dir, `[ -d "$1" ] && echo present || echo absent`, nil, dir)
	if err != nil {
		return err
	}
	if strings.TrimSpace(string(out)) != "present" {
		return errNoDir
	}
	for _, n := range sortedNames(files) {
		if err := f.writeFile(ctx, path.Join(dir, n), files[n]); err != nil {
			return err
		}
	}
	return nil
}

func (f *remoteFS) removeAll(ctx context.Context, dir string) error {
	_, err := f.script(ctx, "removing "+dir, `rm -rf -- "$1"`, nil, dir)
	return err
}

func (f *remoteFS) readFile(ctx context.Context, p string, limit int64) ([]byte, error) {
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

// installBinary copies the binary to WorkDir/bin/pondctl-SHA256 on the
// login node, unless a file of that checksum is there: it is checked
// once by this site, then trusted.
func (f *remoteFS) installBinary(ctx context.Context, local string) (string, error) {
	sum, err := f.s.checksum(local)
	if err != nil {
		return "", fmt.Errorf("binary: %w", err)
	}
	binDir := path.Join(f.s.cfg.WorkDir, "bin")
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

func (f *remoteFS) checkWorkDir(ctx context.Context) error {
	_, err := f.script(ctx, "writing into the work directory",
		`umask 077; mkdir -p -- "$1" && t=$(mktemp "$1/.check-XXXXXX") && rm -f -- "$t"`, nil, f.s.cfg.WorkDir)
	return err
}

func (f *remoteFS) tempDir(ctx context.Context) (string, error) {
	out, err := f.script(ctx, "making a directory in the work directory",
		`umask 077; mkdir -p -- "$1" && mktemp -d "$1/.check-XXXXXX"`, nil, f.s.cfg.WorkDir)
	if err != nil {
		return "", err
	}
	d := strings.TrimSpace(string(out))
	if !strings.HasPrefix(d, f.s.cfg.WorkDir+"/") {
		return "", fmt.Errorf("mktemp on the login node said %q", out)
	}
	return d, nil
}

func (f *remoteFS) user(ctx context.Context) (string, string, error) {
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
