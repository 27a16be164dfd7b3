package tools

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/pond-htc/pond/condor/auth"
)

// ClientConfig is what WriteClientConfig writes: an HTCondor client
// configuration of one pool, and the credentials it names.
type ClientConfig struct {
	// Dir is the directory written: Dir/condor_config, Dir/tokens.d/pond
	// (the HTCondor-format token HTCondor's clients present),
	// Dir/pond.token (pond's own token, which pond's tools present, kept
	// out of tokens.d where HTCondor's clients would offer it too),
	// Dir/ca.pem (the sea's CA, when there is one) and Dir/cert.pem and
	// Dir/key.pem (a client certificate, when there is one).
	Dir string
	// Pool is the API address (host:port) of a node of the pool, as
	// -pool takes it: CONDOR_HOST and POND_POOL_ADDR.
	Pool string
	// Collector is COLLECTOR_HOST, where HTCondor's own clients find the
	// collector; "" means $(CONDOR_HOST).
	Collector string
	// Token is pond's own token, which pond's tools present to the pool's
	// API; "" writes none.
	Token string
	// HTCondorToken is the HTCondor-format token (IDTOKENS) HTCondor's
	// clients present over CEDAR; "" writes none, and they authenticate
	// with FS alone (on the pool's host). One of the two tokens is needed.
	HTCondorToken string
	// CA is the PEM of the sea's CA, nil for a sea without TLS.
	CA []byte
	// Cert and Key are the PEM of a client certificate of the sea's CA
	// and its key, which HTCondor's clients present with SSL; nil for
	// none. They need CA.
	Cert, Key []byte
	// Force replaces files a previous run wrote.
	Force bool
}

// The files WriteClientConfig writes, relative to its directory.
const (
	ClientConfigFile        = "condor_config"
	ClientTokenDir          = "tokens.d"
	ClientHTCondorTokenFile = "tokens.d/pond"
	ClientTokenFile         = "pond.token"
	ClientCAFile            = "ca.pem"
	ClientCertFile          = "cert.pem"
	ClientKeyFile           = "key.pem"
)

// WriteClientConfig writes the client configuration cc describes, every
// file mode 0600 and the directories 0700, each file replaced at once
// (a reader sees the old file or the new one). It refuses, without
// writing anything, to replace a file that exists unless cc.Force is
// set, and to write through a symbolic link. It returns the files
// written.
func WriteClientConfig(cc ClientConfig) ([]string, error) {
	if cc.Dir == "" {
		return nil, errors.New("no directory given")
	}
	if _, _, err := net.SplitHostPort(cc.Pool); err != nil {
		return nil, fmt.Errorf("pool address %q is not HOST:PORT: %w", cc.Pool, err)
	}
	if strings.ContainsAny(cc.Collector+cc.Pool, "\n\r") {
		return nil, errors.New("an address cannot hold a line break")
	}
	cc.Token, cc.HTCondorToken = strings.TrimSpace(cc.Token), strings.TrimSpace(cc.HTCondorToken)
	if cc.Token == "" && cc.HTCondorToken == "" {
		return nil, errors.New("no token to write")
	}
	if strings.ContainsAny(cc.Token+cc.HTCondorToken, "\n\r") {
		return nil, errors.New("a token cannot hold a line break")
	}
	dir, err := filepath.Abs(cc.Dir)
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{
		ClientConfigFile: nil, // below: it names the others
	}
	if cc.Token != "" {
		files[ClientTokenFile] = []byte(cc.Token + "\n")
	}
	if cc.HTCondorToken != "" {
		files[ClientHTCondorTokenFile] = []byte(cc.HTCondorToken + "\n")
	}
	if cc.CA != nil {
		files[ClientCAFile] = cc.CA
	}
	if (cc.Cert == nil) != (cc.Key == nil) || (cc.Cert != nil && cc.CA == nil) {
		return nil, errors.New("a client certificate needs its key and the CA")
	}
	if cc.Cert != nil {
		files[ClientCertFile], files[ClientKeyFile] = cc.Cert, cc.Key
	}
	files[ClientConfigFile] = []byte(clientConfigText(dir, cc))
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	// Check everything before writing anything.
	for _, d := range []string{dir, filepath.Join(dir, ClientTokenDir)} {
		if fi, err := os.Lstat(d); err == nil && !fi.IsDir() {
			return nil, fmt.Errorf("%s exists and is not a directory", d)
		}
	}
	var exist []string
	for _, n := range names {
		p := filepath.Join(dir, filepath.FromSlash(n))
		fi, err := os.Lstat(p)
		switch {
		case err == nil && !fi.Mode().IsRegular():
			return nil, fmt.Errorf("%s exists and is not a regular file", p)
		case err == nil:
			exist = append(exist, p)
		case !errors.Is(err, os.ErrNotExist):
			return nil, err
		}
	}
	if len(exist) > 0 && !cc.Force {
		return nil, fmt.Errorf("%s already exists (use -force to replace it)", strings.Join(exist, ", "))
	}
	for _, d := range []string{dir, filepath.Join(dir, ClientTokenDir)} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
		if err := os.Chmod(d, 0o700); err != nil {
			return nil, err
		}
	}
	var written []string
	for _, n := range names {
		p := filepath.Join(dir, filepath.FromSlash(n))
		if err := auth.WriteFile(p, files[n], 0o600); err != nil {
			return written, err
		}
		written = append(written, p)
	}
	return written, nil
}

// clientConfigText is the condor_config of cc, written in dir.
// HTCondor's clients try IDTOKENS (the token of tokens.d), then SSL (the
// client certificate, when there is one), then FS (a client on the pool's
// host); nothing else, CLAIMTOBE least of all, which pond's agents refuse.
func clientConfigText(dir string, cc ClientConfig) string {
	collector, schedd := cc.Collector, cc.Collector
	if collector == "" {
		collector, schedd = "$(CONDOR_HOST)", "$(CONDOR_HOST)"
	}
	methods := "IDTOKENS, FS"
	if cc.Cert != nil {
		methods = "IDTOKENS, SSL, FS"
	}
	var b strings.Builder
	fmt.Fprintf(&b, `# HTCondor client configuration of the pond pool at %s, written by
# "pondctl condor client-config". With CONDOR_CONFIG naming this file,
# HTCondor's clients and pond's condor_* commands talk to that pool.

CONDOR_HOST = %s
COLLECTOR_HOST = %s
# The schedd HTCondor's clients use when not given one (condor_q,
# htcondor2.Schedd()): the one at the pool node's CEDAR address.
SCHEDD_HOST = %s

# Security of HTCondor's own clients (they reach the pool through its
# CEDAR listener): the token of tokens.d, else the client certificate
# (SSL) when there is one, else FS on the pool's host. No password file of
# this host's own HTCondor is used.
SEC_CLIENT_AUTHENTICATION = REQUIRED
SEC_CLIENT_AUTHENTICATION_METHODS = %s
SEC_CLIENT_INTEGRITY = REQUIRED
SEC_CLIENT_ENCRYPTION = REQUIRED
SEC_TOKEN_DIRECTORY = %s
SEC_PASSWORD_DIRECTORY = %s
`, cc.Pool, cc.Pool, collector, schedd, methods, filepath.Join(dir, ClientTokenDir), filepath.Join(dir, "passwords.d"))
	if cc.Cert != nil {
		fmt.Fprintf(&b, `
# SSL: the client's certificate and the sea's CA, which the node's
# certificate must come from. As between pond's own nodes, the CA is
# what is checked, not the host name: a node's address may change.
AUTH_SSL_CLIENT_CAFILE = %s
AUTH_SSL_CLIENT_CERTFILE = %s
AUTH_SSL_CLIENT_KEYFILE = %s
SSL_SKIP_HOST_CHECK = true
`, filepath.Join(dir, ClientCAFile), filepath.Join(dir, ClientCertFile), filepath.Join(dir, ClientKeyFile))
	}
	fmt.Fprintf(&b, `
# pond's own tools (pondctl condor, the condor_* links): the node's API
# address, the token they present and the CA they verify the pool with.
%s = %s
`, KnobPoolAddr, cc.Pool)
	if cc.Token != "" {
		fmt.Fprintf(&b, "%s = %s\n", KnobTokenFile, filepath.Join(dir, ClientTokenFile))
	}
	if cc.CA != nil {
		fmt.Fprintf(&b, "%s = %s\n", KnobTLSCA, filepath.Join(dir, ClientCAFile))
	}
	return b.String()
}

// Link is a link InstallLinks made or found.
type Link struct {
	Path    string // DIR/condor_q
	Target  string // the pondctl it points at
	Changed bool   // made or re-pointed now (false: it was already so)
}

// InstallLinks makes in dir a symbolic link to target for every name of
// Commands (condor_submit, condor_q, ...). A link that is already there
// and points at target is left; a link pointing elsewhere is re-pointed;
// anything else of that name (a file, a directory) is left alone and
// reported in the error, after the other links are made.
func InstallLinks(dir, target string) ([]Link, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("%s is not a directory", dir)
	}
	names := make([]string, 0, len(Commands()))
	for n := range Commands() {
		names = append(names, n)
	}
	sort.Strings(names)
	var links []Link
	var errs []error
	for _, n := range names {
		p := filepath.Join(dir, n)
		fi, err := os.Lstat(p)
		switch {
		case errors.Is(err, os.ErrNotExist):
		case err != nil:
			errs = append(errs, err)
			continue
		case fi.Mode()&os.ModeSymlink == 0:
			errs = append(errs, fmt.Errorf("%s exists and is not a symbolic link: left alone", p))
			continue
		default:
			if cur, err := os.Readlink(p); err == nil && cur == target {
				links = append(links, Link{Path: p, Target: target})
				continue
			}
		}
		// A new link, renamed over the name: never a moment without one.
		tmp := filepath.Join(dir, "."+n+".pondctl-link")
		os.Remove(tmp)
		if err := os.Symlink(target, tmp); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := os.Rename(tmp, p); err != nil {
			os.Remove(tmp)
			errs = append(errs, err)
			continue
		}
		links = append(links, Link{Path: p, Target: target, Changed: true})
	}
	return links, errors.Join(errs...)
}
