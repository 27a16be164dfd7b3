package auth

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
)

// TokenFile returns a function that gives the token stored in the file at
// path, reading the file again whenever its size or modification time
// changes, so that a node whose token is refreshed in place (a glidein's,
// a cloud node's) presents the new one without a restart. The file must
// hold a token now; later, a file that cannot be read or is empty leaves
// the last token in use. The check is a stat per call.
func TokenFile(path string) (func() string, error) {
	tok, fi, err := readTokenFile(path)
	if err != nil {
		return nil, err
	}
	var (
		mu   sync.Mutex
		mod  = fi.ModTime()
		size = fi.Size()
	)
	return func() string {
		mu.Lock()
		defer mu.Unlock()
		fi, err := os.Stat(path)
		if err != nil || (fi.ModTime().Equal(mod) && fi.Size() == size) {
			return tok
		}
		if t, fi, err := readTokenFile(path); err == nil {
			tok, mod, size = t, fi.ModTime(), fi.Size()
		}
		return tok
	}, nil
}

// readTokenFile reads the token in path, and the file's information as it
// was before the read (a change during the read is seen by the next call).
func readTokenFile(path string) (string, os.FileInfo, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", nil, fmt.Errorf("token file: %w", err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return "", nil, fmt.Errorf("token file: %w", err)
	}
	tok := strings.TrimSpace(string(data))
	if tok == "" {
		return "", nil, errors.New("token file " + path + " is empty")
	}
	return tok, fi, nil
}
