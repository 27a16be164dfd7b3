package cedar

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/pond-htc/pond/condor/auth"
)

// FS authenticates a client on the same host by the file system: the
// server names a directory that does not exist yet, the client creates it
// (mode 0700), and the directory's owner is the client's user. The client
// must be able to create entries in Dir, which a remote client cannot.
type FS struct {
	Dir    string // where the directory is named (default os.TempDir())
	Domain string // the domain of the users it proves
	// Grant maps a proven local user to what pond grants it; nil claims
	// grant nothing.
	Grant func(uid uint32, name string) *auth.Claims
}

// Name implements Method.
func (*FS) Name() string { return "FS" }

// Bit implements Method.
func (*FS) Bit() int { return BitFS }

// Authenticate implements Method.
func (f *FS) Authenticate(ctx context.Context, s *Stream) (*Identity, error) {
	dir := f.Dir
	if dir == "" {
		dir = os.TempDir()
	}
	var rnd [16]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return nil, err
	}
	// HTCondor's client checks that the name starts with the address it
	// dialed, FS_<ip>_<port>_, so that a name meant for one server cannot
	// be replayed to another.
	prefix := "FS_"
	if host, port, err := net.SplitHostPort(s.Conn().LocalAddr().String()); err == nil {
		prefix += host + "_" + port + "_"
	}
	path := filepath.Join(dir, prefix+hex.EncodeToString(rnd[:]))
	if err := s.PutString(path); err != nil {
		return nil, err
	}
	if err := s.EndMessage(); err != nil {
		return nil, err
	}
	made, err := s.GetInt()
	if err != nil {
		return nil, fmt.Errorf("reading the client's answer: %w", err)
	}
	if err := s.EndRead(); err != nil {
		return nil, err
	}
	id, verr := f.verify(path, made)
	// The client removes the directory once it has the answer; remove it
	// too in case it does not (a directory the client made is its own).
	defer os.Remove(path)
	result := int64(0)
	if verr != nil {
		result = -1
	}
	if err := s.PutInt(result); err != nil {
		return nil, err
	}
	if err := s.EndMessage(); err != nil {
		return nil, err
	}
	if verr != nil {
		return nil, verr
	}
	return id, nil
}

func (f *FS) verify(path string, made int64) (*Identity, error) {
	if made != 0 {
		return nil, fmt.Errorf("the client could not create %s", path)
	}
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, fmt.Errorf("the client's directory: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil, errors.New("no owner on this file system")
	}
	if !fi.IsDir() || fi.Mode()&os.ModeSymlink != 0 {
		return nil, fmt.Errorf("%s is not a directory", path)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%s has mode %o; others may write it", path, fi.Mode().Perm())
	}
	if st.Nlink > 2 {
		return nil, fmt.Errorf("%s has %d links", path, st.Nlink)
	}
	name := strconv.FormatUint(uint64(st.Uid), 10)
	if u, err := user.LookupId(name); err == nil {
		name = u.Username
	}
	id := &Identity{Method: "FS", User: name, Domain: f.Domain}
	if f.Grant != nil {
		id.Claims = f.Grant(st.Uid, name)
	}
	return id, nil
}
