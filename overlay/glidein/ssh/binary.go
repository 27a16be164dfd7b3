package ssh

import (
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"time"
)

// arch is what a binary needs of a host: `uname -s` and one of the
// `uname -m` answers.
type arch struct {
	// Name is the Go name, "linux/arm64".
	Name     string
	OS       string
	Machines []string
}

// fits reports whether a host with these uname answers runs the binary.
func (a arch) fits(os, machine string) bool {
	return os == a.OS && slices.Contains(a.Machines, machine)
}

// The uname -s of each GOOS a glidein may run on.
var unameOS = map[string]string{"linux": "Linux", "freebsd": "FreeBSD", "netbsd": "NetBSD", "openbsd": "OpenBSD"}

// The uname -m answers of each GOARCH.
var unameMachines = map[string][]string{
	"amd64":   {"x86_64", "amd64"},
	"386":     {"i386", "i486", "i586", "i686"},
	"arm64":   {"aarch64", "arm64"},
	"arm":     {"armv6l", "armv7l", "armv8l", "arm"},
	"ppc64le": {"ppc64le"},
	"ppc64":   {"ppc64"},
	"s390x":   {"s390x"},
	"riscv64": {"riscv64"},
	"loong64": {"loongarch64"},
}

// goArch returns the arch of a GOOS/GOARCH pair.
func goArch(goos, goarch string) (arch, error) {
	os, ok1 := unameOS[goos]
	ms, ok2 := unameMachines[goarch]
	if !ok1 || !ok2 {
		return arch{}, fmt.Errorf("%s/%s is not an architecture the SSH site knows", goos, goarch)
	}
	return arch{Name: goos + "/" + goarch, OS: os, Machines: ms}, nil
}

// hostArch is the arch of the running program.
func hostArch() (arch, error) { return goArch(runtime.GOOS, runtime.GOARCH) }

// elfArch reads the architecture of the ELF executable r from its header.
func elfArch(r io.ReaderAt) (arch, error) {
	f, err := elf.NewFile(r)
	if err != nil {
		return arch{}, fmt.Errorf("not an ELF executable (build it with GOOS=linux): %w", err)
	}
	defer f.Close()
	goos := "linux"
	switch f.OSABI {
	case elf.ELFOSABI_NONE, elf.ELFOSABI_LINUX:
	case elf.ELFOSABI_FREEBSD:
		goos = "freebsd"
	case elf.ELFOSABI_NETBSD:
		goos = "netbsd"
	case elf.ELFOSABI_OPENBSD:
		goos = "openbsd"
	default:
		return arch{}, fmt.Errorf("ELF OS ABI %v is not one the SSH site knows", f.OSABI)
	}
	var goarch string
	switch f.Machine {
	case elf.EM_X86_64:
		goarch = "amd64"
	case elf.EM_386:
		goarch = "386"
	case elf.EM_AARCH64:
		goarch = "arm64"
	case elf.EM_ARM:
		goarch = "arm"
	case elf.EM_PPC64:
		goarch = "ppc64"
		if f.Data == elf.ELFDATA2LSB {
			goarch = "ppc64le"
		}
	case elf.EM_S390:
		goarch = "s390x"
	case elf.EM_RISCV:
		goarch = "riscv64"
	case elf.EM_LOONGARCH:
		goarch = "loong64"
	default:
		return arch{}, fmt.Errorf("ELF machine %v is not one the SSH site knows", f.Machine)
	}
	return goArch(goos, goarch)
}

// exe is a local binary to start on the hosts.
type exe struct {
	Path string
	Arch arch
	// Sum is its sha256, in hex.
	Sum  string
	Size int64
}

// binaryCache remembers the checksums of the binaries it read, by path,
// size and modification time, so that the same pondctl is hashed once.
type binaryCache struct {
	mu   sync.Mutex
	seen map[string]cached
}

type cached struct {
	size  int64
	mtime time.Time
	b     exe
}

// get reads the binary at path: its architecture and checksum.
func (c *binaryCache) get(path string) (exe, error) {
	if path == "" {
		return exe{}, errors.New("no binary: Request.Binary is empty")
	}
	f, err := os.Open(path)
	if err != nil {
		return exe{}, fmt.Errorf("binary: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return exe{}, fmt.Errorf("binary: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return exe{}, fmt.Errorf("binary %s is not a regular file", path)
	}
	c.mu.Lock()
	hit, ok := c.seen[path]
	c.mu.Unlock()
	if ok && hit.size == fi.Size() && hit.mtime.Equal(fi.ModTime()) {
		return hit.b, nil
	}
	a, err := elfArch(f)
	if err != nil {
		return exe{}, fmt.Errorf("binary %s: %w", path, err)
	}
	h := sha256.New()
	n, err := io.Copy(h, io.NewSectionReader(f, 0, fi.Size()))
	if err != nil {
		return exe{}, fmt.Errorf("binary %s: %w", path, err)
	}
	b := exe{Path: path, Arch: a, Sum: hex.EncodeToString(h.Sum(nil)), Size: n}
	c.mu.Lock()
	if c.seen == nil {
		c.seen = map[string]cached{}
	}
	c.seen[path] = cached{size: fi.Size(), mtime: fi.ModTime(), b: b}
	c.mu.Unlock()
	return b, nil
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
