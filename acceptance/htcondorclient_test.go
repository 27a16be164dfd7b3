package acceptance

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/condor/testenv"
)

// clientProgram queries the collector CONDOR_HOST names for its slots
// and locates the schedd, with nothing but what CONDOR_CONFIG says, and
// prints what it saw or the error HTCondor's client raised.
const clientProgram = `
import htcondor2, json
try:
    coll = htcondor2.Collector()
    slots = sorted(a['Name'] for a in coll.query(htcondor2.AdType.Startd, projection=['Name']))
    schedd = coll.locate(htcondor2.DaemonType.Schedd)
    print(json.dumps({'slots': slots, 'schedd': schedd.get('MyAddress', '')}))
except Exception as e:
    print(json.dumps({'error': '%s: %s' % (type(e).__name__, e)}))
`

// clientSaw is what clientProgram printed.
type clientSaw struct {
	Slots  []string `json:"slots"`
	Schedd string   `json:"schedd"`
	Error  string   `json:"error"`
}

// htcondorClient runs HTCondor's Python client (clientProgram) with an
// environment of CONDOR_CONFIG=config alone (and HOME, PATH, and where
// Python finds the wheel), as uid when it is not 0.
type htcondorClient struct {
	python     string // the interpreter
	pythonPath string // where the wheel's packages are, "" for its own
}

func (c htcondorClient) run(t *testing.T, config string, uid int) clientSaw {
	t.Helper()
	home, err := os.MkdirTemp("", "pond-client-home")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	env := []string{"CONDOR_CONFIG=" + config, "PATH=/usr/bin:/bin", "HOME=" + home}
	if c.pythonPath != "" {
		env = append(env, "PYTHONPATH="+c.pythonPath)
	}
	cmd := exec.Command(c.python, "-c", clientProgram)
	if uid != 0 {
		if err := os.Chown(home, uid, uid); err != nil {
			t.Fatal(err)
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
	}
	cmd.Env, cmd.Dir = env, home
	out, err := cmd.CombinedOutput()
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	var saw clientSaw
	if err != nil || json.Unmarshal([]byte(lines[len(lines)-1]), &saw) != nil {
		t.Fatalf("HTCondor's client as uid %d: %v\n%s", uid, err, out)
	}
	return saw
}

// unprivilegedPython finds a Python interpreter and the htcondor wheel's
// packages that a user other than root can run: the wheel copied into a
// directory anyone may read, run with the system's interpreter of the
// same version. ok is false when there is none.
func unprivilegedPython(t *testing.T) (htcondorClient, bool) {
	t.Helper()
	out, err := exec.Command("python3", "-c",
		"import htcondor2, os, sys; print(os.path.dirname(os.path.dirname(htcondor2.__file__))); print('python%d.%d' % sys.version_info[:2])").Output()
	if err != nil {
		return htcondorClient{}, false
	}
	site, version, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	python := filepath.Join("/usr/bin", version)
	if _, err := os.Stat(python); err != nil {
		return htcondorClient{}, false
	}
	dir, err := os.MkdirTemp("", "pond-htcondor-wheel")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	for _, p := range []string{"htcondor2", "classad2", "htcondor.libs"} {
		if err := exec.Command("cp", "-r", filepath.Join(site, p), dir).Run(); err != nil {
			return htcondorClient{}, false
		}
	}
	if err := exec.Command("chmod", "-R", "a+rX", dir).Run(); err != nil {
		t.Fatal(err)
	}
	return htcondorClient{python: python, pythonPath: dir}, true
}

// withSettings writes a copy of the configuration at config with lines
// appended (later settings win) and returns its path.
func withSettings(t *testing.T, config, name string, uid int, lines ...string) string {
	t.Helper()
	base, err := os.ReadFile(config)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(filepath.Dir(config), name)
	if err := os.WriteFile(path, append(base, []byte("\n"+strings.Join(lines, "\n")+"\n")...), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(path, uid, uid); err != nil {
		t.Fatal(err)
	}
	return path
}

// tokenDir makes a token directory (0700) holding tokens, owned by uid.
func tokenDir(t *testing.T, parent, name string, uid int, tokens ...string) string {
	t.Helper()
	dir := filepath.Join(parent, name)
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for i, tok := range tokens {
		p := filepath.Join(dir, fmt.Sprintf("t%d", i))
		if err := os.WriteFile(p, []byte(tok+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, uid, uid); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chown(dir, uid, uid); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestHTCondorClientConfig checks that HTCondor's own Python client, with
// nothing set but CONDOR_CONFIG naming what `pondctl condor client-config`
// wrote, queries a pool's collector and locates its schedd: as root, and
// as a user who cannot read the working directory, with the token alone
// and with the certificate alone; and that no token, an expired one, one
// of another working directory's authority, CLAIMTOBE, no certificate,
// one of another CA and a server of another CA are each refused with the
// client's own error, the agent serving on.
func TestHTCondorClientConfig(t *testing.T) {
	t.Parallel()
	testenv.NeedRoot(t, "running HTCondor's client as another user")
	if exec.Command("python3", "-c", "import htcondor2").Run() != nil {
		testenv.SkipOrFail(t, "the htcondor Python wheel is not installed")
	}
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Fatal(err)
	}
	rootClient := htcondorClient{python: py}
	w := newWorkdir(t, "")
	w.write("main.pond.hcl", cedarPool)
	w.expect(0, "apply", "-auto-approve")
	cm := w.output("cm")

	rootDir := filepath.Join(t.TempDir(), "client")
	w.expect(0, "condor", "client-config", "-pool", cm, "-dir", rootDir)
	for _, f := range []string{"condor_config", "pond.token", "tokens.d/pond", "cert.pem", "key.pem"} {
		if fi, err := os.Stat(filepath.Join(rootDir, f)); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, %v; want mode 0600", f, err, fi)
		}
	}
	if ents, _ := os.ReadDir(filepath.Join(rootDir, "tokens.d")); len(ents) != 1 {
		t.Errorf("tokens.d holds %d files, want the HTCondor token alone", len(ents))
	}
	rootCfg := filepath.Join(rootDir, "condor_config")
	var saw clientSaw
	eventually(t, 60*time.Second, func() error {
		saw = rootClient.run(t, rootCfg, 0)
		if saw.Error != "" || len(saw.Slots) != 2 || saw.Schedd == "" {
			return fmt.Errorf("as root: %+v", saw)
		}
		return nil
	})
	// The token alone, FS left out.
	tokOnly := withSettings(t, rootCfg, "token_only", 0, "SEC_CLIENT_AUTHENTICATION_METHODS = IDTOKENS")
	if saw := rootClient.run(t, tokOnly, 0); saw.Error != "" || len(saw.Slots) != 2 || saw.Schedd == "" {
		t.Errorf("as root with the token alone: %+v", saw)
	}

	// A user who cannot read the working directory (nor the authority's
	// key in it), with a configuration of its own.
	const nobody = 65534
	client, ok := unprivilegedPython(t)
	if !ok {
		testenv.SkipOrFail(t, "no system Python of the wheel's version for an unprivileged user")
	}
	keyFile := filepath.Join(w.dir, ".pond", "auth", auth.HTCondorKeysDir, auth.HTCondorPoolKey)
	for _, p := range []string{w.dir, keyFile} {
		ls := exec.Command("ls", p)
		ls.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
		if out, err := ls.CombinedOutput(); err == nil {
			t.Fatalf("nobody can read %s: %s", p, out)
		}
	}
	share, err := os.MkdirTemp("", "pond-client")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(share) })
	if err := os.Chmod(share, 0o755); err != nil {
		t.Fatal(err)
	}
	userDir := filepath.Join(share, "client")
	w.expect(0, "condor", "client-config", "-pool", cm, "-dir", userDir, "-subject", "nobody", "-scope", "READ")
	if err := exec.Command("chown", "-R", fmt.Sprintf("%d:%d", nobody, nobody), userDir).Run(); err != nil {
		t.Fatal(err)
	}
	userCfg := filepath.Join(userDir, "condor_config")
	if saw := client.run(t, userCfg, nobody); saw.Error != "" || len(saw.Slots) != 2 || saw.Schedd == "" {
		t.Errorf("as nobody: %+v", saw)
	}
	userTokOnly := withSettings(t, userCfg, "token_only", nobody, "SEC_CLIENT_AUTHENTICATION_METHODS = IDTOKENS")
	if saw := client.run(t, userTokOnly, nobody); saw.Error != "" || len(saw.Slots) != 2 {
		t.Errorf("as nobody with the token alone: %+v", saw)
	}
	// The sea speaks TLS: the certificate alone (SSL).
	userSSLOnly := withSettings(t, userCfg, "ssl_only", nobody, "SEC_CLIENT_AUTHENTICATION_METHODS = SSL")
	if saw := client.run(t, userSSLOnly, nobody); saw.Error != "" || len(saw.Slots) != 2 {
		t.Errorf("as nobody with the certificate alone: %+v", saw)
	}

	// Refused: each a credential of its own, nothing else to fall back on.
	key, err := auth.ReadHTCondorKey(keyFile, auth.HTCondorPoolKey)
	if err != nil {
		t.Fatal(err)
	}
	var issuer struct {
		Issuer string `json:"iss"`
	}
	tok, _ := os.ReadFile(filepath.Join(userDir, "tokens.d", "pond"))
	if err := decodeJWTPayload(strings.TrimSpace(string(tok)), &issuer); err != nil {
		t.Fatal(err)
	}
	expired, err := auth.MintHTCondor(key, auth.Claims{Issuer: issuer.Issuer, Subject: "nobody@" + issuer.Issuer,
		Scopes: []auth.Scope{auth.Read}, IssuedAt: time.Now().Add(-2 * time.Hour), Expires: time.Now().Add(-time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	other := newWorkdir(t, "")
	foreign := strings.TrimSpace(other.expect(0, "token", "create", "-htcondor", "-subject", "nobody", "-scope", "READ").stdout)
	otherCert := filepath.Join(share, "othercert")
	if err := os.Mkdir(otherCert, 0o700); err != nil {
		t.Fatal(err)
	}
	other.expect(0, "cert", "create", "-name", "nobody", "-dir", otherCert)
	if err := exec.Command("chown", "-R", fmt.Sprintf("%d:%d", nobody, nobody), otherCert).Run(); err != nil {
		t.Fatal(err)
	}
	for name, cfgLines := range map[string][]string{
		"no token": {"SEC_CLIENT_AUTHENTICATION_METHODS = IDTOKENS",
			"SEC_TOKEN_DIRECTORY = " + tokenDir(t, share, "empty", nobody)},
		"an expired token": {"SEC_CLIENT_AUTHENTICATION_METHODS = IDTOKENS",
			"SEC_TOKEN_DIRECTORY = " + tokenDir(t, share, "expired", nobody, expired)},
		"a token of another authority": {"SEC_CLIENT_AUTHENTICATION_METHODS = IDTOKENS",
			"SEC_TOKEN_DIRECTORY = " + tokenDir(t, share, "foreign", nobody, foreign)},
		"CLAIMTOBE": {"SEC_CLIENT_AUTHENTICATION_METHODS = CLAIMTOBE"},
		"no certificate": {"SEC_CLIENT_AUTHENTICATION_METHODS = SSL",
			"AUTH_SSL_CLIENT_CERTFILE = " + filepath.Join(share, "none.pem"), "AUTH_SSL_CLIENT_KEYFILE = " + filepath.Join(share, "none.key")},
		"a certificate of another CA": {"SEC_CLIENT_AUTHENTICATION_METHODS = SSL",
			"AUTH_SSL_CLIENT_CERTFILE = " + filepath.Join(otherCert, "tls.crt"), "AUTH_SSL_CLIENT_KEYFILE = " + filepath.Join(otherCert, "tls.key")},
		"a server of another CA": {"SEC_CLIENT_AUTHENTICATION_METHODS = SSL",
			"AUTH_SSL_CLIENT_CAFILE = " + filepath.Join(otherCert, "ca.pem")},
	} {
		cfg := withSettings(t, userCfg, strings.ReplaceAll(name, " ", "_"), nobody, cfgLines...)
		saw := client.run(t, cfg, nobody)
		if saw.Error == "" || len(saw.Slots) > 0 {
			t.Errorf("%s: HTCondor's client was answered: %+v", name, saw)
		} else {
			t.Logf("%s: %s", name, saw.Error)
		}
	}

	// The agent serves on, over CEDAR and its API.
	if saw := rootClient.run(t, rootCfg, 0); saw.Error != "" || len(saw.Slots) != 2 {
		t.Errorf("after the refusals: %+v", saw)
	}
	if r := w.expect(0, "condor", "status", "-pool", cm, "-af", "Name"); strings.Count(r.stdout, "@") != 2 {
		t.Errorf("the API after the refusals: %s", r)
	}
}

// decodeJWTPayload decodes the payload of a JWT into v, unchecked.
func decodeJWTPayload(tok string, v any) error {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return fmt.Errorf("not a JWT: %d parts", len(parts))
	}
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, v)
}
