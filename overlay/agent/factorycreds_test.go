package agent

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/condor/wire"
	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/factory"
)

// TestFactoryCredentialsRoute starts a central manager's agent with no
// factory credentials, as one started before its pool gained a factory,
// and gives them to it through PUT /v1/factory/credentials: credentials
// of another pool are refused and change nothing, the pool's own are
// kept in the data directory (0600) and used at once to sign and certify
// a glidein, whose token a verifier of the trusted keys accepts; GET
// /v1/factory shows them; the route takes an administrator's token and
// TLS.
func TestFactoryCredentialsRoute(t *testing.T) {
	t.Parallel()
	sea := testAuthority(t)
	trusted := filepath.Join(sea.Dir(), auth.TrustedKeysFile)
	cm := startAgents(t, withCert(t, sea, &Config{Name: "cm", Role: "cm", Pool: "campus",
		TrustedKeys: trusted, TokenIssuer: sea.Issuer()}))[0]
	clientTLS, err := auth.ClientTLS(sea.CAFile(), "", "")
	if err != nil {
		t.Fatal(err)
	}
	token := func(scopes ...auth.Scope) string {
		tok, err := sea.Mint("tester", scopes, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	admin := api.NewClient(cm.APIAddr()).WithTLS(clientTLS).WithToken(token(auth.SeaAdmin))
	e := api.FactoryEntrySpec{Name: "hpc", Site: api.FactorySite{Kind: "slurm"},
		Template: api.FactoryTemplate{CPUs: 1, MemoryMB: 512, Lifetime: api.Duration(time.Hour)}}
	id := api.FactoryPrefix("campus") + "hpc-1-abcd"
	if _, err := cm.factory.Request(e, id); err == nil {
		t.Fatal("a factory with no credentials made a glidein's request: the test shows nothing")
	}
	if st, err := admin.Factory(t.Context()); err != nil || st.Credentials != nil {
		t.Fatalf("credentials before any were given: %+v, %v", st, err)
	}

	creds := func(pool string) api.FactoryCredentials {
		k, err := sea.Delegate(auth.KeyLimits{Name: "factory " + pool, SubjectPrefix: "node/" + api.FactoryPrefix(pool),
			Scopes: []auth.Scope{auth.Daemon, auth.SeaRead}, MaxLifetime: 5 * time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "factory.key")
		if err := auth.WriteSigningKey(path, k); err != nil {
			t.Fatal(err)
		}
		key, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		ca, err := sea.DelegateCA(api.FactoryPrefix(pool), 24*time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return api.FactoryCredentials{Key: string(key), CA: string(ca)}
	}
	dir := filepath.Join(cm.cfg.DataDir, factory.CredentialsDir)

	// Another pool's, whole or in part: refused, nothing kept.
	other, own := creds("other"), creds("campus")
	for name, c := range map[string]api.FactoryCredentials{
		"other pool":       other,
		"other pool's key": {Key: other.Key, CA: own.CA},
		"other pool's CA":  {Key: own.Key, CA: other.CA},
		"no CA":            {Key: own.Key},
	} {
		_, err := admin.SetFactoryCredentials(t.Context(), c)
		if err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		if name != "no CA" && !strings.Contains(err.Error(), "another pool's factory") {
			t.Errorf("%s: %v, want it to say the credentials are another pool's", name, err)
		}
		if _, err := os.Stat(filepath.Join(dir, factory.CredentialsKeyFile)); err == nil {
			t.Fatalf("%s: refused, and kept", name)
		}
	}

	// The route's authorization: no token, a reader's, plain HTTP.
	for name, c := range map[string]*api.Client{
		"no token": api.NewClient(cm.APIAddr()).WithTLS(clientTLS),
		"reader":   api.NewClient(cm.APIAddr()).WithTLS(clientTLS).WithToken(token(auth.SeaRead)),
		"node":     api.NewClient(cm.APIAddr()).WithTLS(clientTLS).WithToken(token(auth.Daemon, auth.SeaRead)),
	} {
		_, err := c.SetFactoryCredentials(t.Context(), own)
		var he *wire.Error
		want := http.StatusForbidden
		if name == "no token" {
			want = http.StatusUnauthorized
		}
		if !errors.As(err, &he) || he.Status != want {
			t.Errorf("%s: %v, want %d", name, err, want)
		}
	}

	st, err := admin.SetFactoryCredentials(t.Context(), own)
	if err != nil {
		t.Fatal(err)
	}
	if st.Credentials == nil || st.Credentials.Prefix != api.FactoryPrefix("campus") || time.Until(st.Credentials.CAExpires) < time.Hour {
		t.Fatalf("credentials shown: %+v", st.Credentials)
	}
	for _, f := range []string{dir, filepath.Join(dir, factory.CredentialsKeyFile), filepath.Join(dir, factory.CredentialsCAFile)} {
		fi, err := os.Stat(f)
		if err != nil || fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s: %v %v, want it private", f, fi, err)
		}
	}
	req, err := cm.factory.Request(e, id)
	if err != nil {
		t.Fatalf("the factory with the credentials given: %v", err)
	}
	keys, delegated, err := auth.ReadTrustedKeys(trusted)
	if err != nil {
		t.Fatal(err)
	}
	v := &auth.Verifier{Issuer: sea.Issuer(), Keys: keys, Delegated: delegated}
	claims, err := v.Verify(strings.TrimSpace(string(req.Files[factory.TokenFile])))
	if err != nil || claims.Subject != "node/"+id {
		t.Fatalf("the glidein's token: %+v, %v", claims, err)
	}
	// The agent itself, started before the key was delegated, trusts it.
	if _, err := cm.verifier.Verify(strings.TrimSpace(string(req.Files[factory.TokenFile]))); err != nil {
		t.Fatalf("the central manager refuses its own factory's glidein token: %v", err)
	}
	if len(req.Files[auth.NodeCertFile]) == 0 || len(req.Files[auth.NodeKeyFile]) == 0 {
		t.Fatal("the glidein has no certificate")
	}

	// A plain agent takes no credentials over plain HTTP, token or not.
	plain := startAgents(t, &Config{Name: "plain", Role: "cm", Pool: "campus", TrustedKeys: trusted, TokenIssuer: sea.Issuer()})[0]
	_, err = api.NewClient(plain.APIAddr()).WithToken(token(auth.SeaAdmin)).SetFactoryCredentials(t.Context(), api.FactoryCredentials{Key: own.Key})
	var he *wire.Error
	if !errors.As(err, &he) || he.Status != http.StatusUpgradeRequired || !strings.Contains(err.Error(), "TLS") {
		t.Errorf("credentials over plain HTTP: %v", err)
	}
}

// TestFactoryCredentialsKept checks that the credentials given to a
// central manager's agent are used again after a restart with no
// -factory-key, and that kept ones it can no longer use (its key taken
// back from the trusted keys) leave it starting without them.
func TestFactoryCredentialsKept(t *testing.T) {
	t.Parallel()
	sea := testAuthority(t)
	trusted := filepath.Join(sea.Dir(), auth.TrustedKeysFile)
	data := t.TempDir()
	base := withCert(t, sea, &Config{Name: "cm", Role: "cm", Pool: "campus", TrustedKeys: trusted, TokenIssuer: sea.Issuer()})
	start := func() (*Agent, func()) {
		cfg := *base
		cfg.Bind, cfg.API, cfg.GossipProfile, cfg.DataDir = "127.0.0.1:0", "127.0.0.1:0", "fast", data
		ctx, cancel := context.WithCancel(context.Background())
		a, err := New(ctx, &cfg, nil)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { a.Run(ctx); close(done) }()
		var once sync.Once
		stop := func() { once.Do(func() { cancel(); <-done }) }
		t.Cleanup(stop)
		return a, stop
	}
	k, err := sea.Delegate(auth.KeyLimits{Name: "factory campus", SubjectPrefix: "node/" + api.FactoryPrefix("campus"),
		Scopes: []auth.Scope{auth.Daemon, auth.SeaRead}, MaxLifetime: 5 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "factory.key")
	if err := auth.WriteSigningKey(keyFile, k); err != nil {
		t.Fatal(err)
	}
	key, _ := os.ReadFile(keyFile)
	ca, err := sea.DelegateCA(api.FactoryPrefix("campus"), 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cm, stop := start()
	if err := cm.factory.SetCredentials(api.FactoryCredentials{Key: string(key), CA: string(ca)}); err != nil {
		t.Fatal(err)
	}
	stop()
	again, stop := start()
	if tokens, subCA := again.factory.Credentials(); tokens == nil || subCA == nil || tokens.Key.ID() != k.ID() {
		t.Fatalf("after a restart: key %v, CA %v", tokens, subCA)
	}
	// The key taken back: the agent starts, with no key.
	keys, delegated, err := auth.ReadTrustedKeys(trusted)
	if err != nil {
		t.Fatal(err)
	}
	var kept []auth.DelegatedKey
	for _, d := range delegated {
		if !d.Key.Equal(k.Public()) {
			kept = append(kept, d)
		}
	}
	if err := auth.WriteTrustedKeys(trusted, keys, kept); err != nil {
		t.Fatal(err)
	}
	stop()
	last, _ := start()
	if tokens, _ := last.factory.Credentials(); tokens != nil {
		t.Fatal("a key taken back is used after a restart")
	}
}
