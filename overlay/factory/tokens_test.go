package factory_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/condor/wire"
	"github.com/pond-htc/pond/overlay/agent"
	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/factory"
	"github.com/pond-htc/pond/overlay/glidein"
	"github.com/pond-htc/pond/overlay/glidein/slurm"
	"github.com/pond-htc/pond/overlay/glidein/slurm/slurmtest"
	"github.com/pond-htc/pond/overlay/glidein/ssh/sshtest"
)

// TestFactoryDelegatedTokens runs the factory of a central manager whose
// sea requires tokens, configured through its API: it holds only a
// delegated key (-factory-key), gives each glidein a node token signed
// with it, and the glidein joins and runs a job; the factory then
// refreshes the token in the running glidein's directory, and the agent
// goes on with the new one. Calls without the admin scope cannot set an
// entry. In a sea that speaks TLS the factory also holds a delegated CA
// (-factory-ca), gives each glidein a certificate issued with it (its key
// only in the glidein's files), and the glidein, verified by the central
// manager through the intermediate, joins and runs the job all the same.
func TestFactoryDelegatedTokens(t *testing.T) {
	t.Parallel()
	for _, withTLS := range []bool{false, true} {
		t.Run(map[bool]string{false: "tokens", true: "tokens and TLS"}[withTLS], func(t *testing.T) {
			testFactoryDelegated(t, withTLS)
		})
	}
}

func testFactoryDelegated(t *testing.T, withTLS bool) {
	srv := sshtest.Start(t, 1)
	dir := t.TempDir()
	authority, err := auth.OpenAuthority(filepath.Join(dir, "auth"))
	if err != nil {
		t.Fatal(err)
	}
	admin, err := authority.Mint("pondctl", []auth.Scope{auth.SeaAdmin, auth.Administrator}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cmTok, _, err := authority.Issue("node/cm", []auth.Scope{auth.Daemon, auth.SeaRead}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	// The delegated key's tokens last at most 20 s: the factory refreshes
	// them at half their life, from their submission on, so the test sees
	// a refresh 10 s after the glidein's submission.
	const life = 20 * time.Second
	fk, err := authority.Delegate(auth.KeyLimits{Name: "factory campus", SubjectPrefix: "node/pond-campus-",
		Scopes: []auth.Scope{auth.Daemon, auth.SeaRead}, MaxLifetime: life})
	if err != nil {
		t.Fatal(err)
	}
	keyFile, tokFile := filepath.Join(dir, "factory.key"), filepath.Join(dir, "cm.token")
	if err := auth.WriteSigningKey(keyFile, fk); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(tokFile, []byte(cmTok+"\n"), 0o600)

	cfg := &agent.Config{Name: "cm", Role: "cm", Pool: "campus", Bind: "127.0.0.1:0", API: "127.0.0.1:0",
		GossipProfile: "fast", DataDir: filepath.Join(dir, "cm"),
		TrustedKeys: filepath.Join(authority.Dir(), auth.TrustedKeysFile), TokenIssuer: authority.Issuer(),
		TokenFile: tokFile, FactoryKey: keyFile,
		ConfigFile: fastCondor(t, "DAEMON_LIST = MASTER COLLECTOR NEGOTIATOR SCHEDD\n")}
	scheme, client := "http://", http.DefaultClient
	var clientTLS *tls.Config
	if withTLS {
		cmDir := filepath.Join(dir, "cm-tls")
		os.MkdirAll(cmDir, 0o700)
		if cfg.TLSCert, cfg.TLSKey, cfg.TLSCA, err = authority.WriteCertificate(cmDir, "cm", []string{"127.0.0.1"}, time.Hour); err != nil {
			t.Fatal(err)
		}
		caPEM, err := authority.DelegateCA("pond-campus-", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		cfg.FactoryCA = filepath.Join(dir, "factory-ca.pem")
		os.WriteFile(cfg.FactoryCA, caPEM, 0o600)
		if clientTLS, err = auth.ClientTLS(cfg.TLSCA, "", ""); err != nil {
			t.Fatal(err)
		}
		scheme, client = "https://", &http.Client{Transport: &http.Transport{TLSClientConfig: clientTLS}}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cm, err := agent.New(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cm.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	site := sshConfig(srv, 2)
	siteJSON, _ := json.Marshal(site)
	conf := fastCondor(t, "NUM_CPUS = 1\nMEMORY = 512\n")
	entry := fmt.Sprintf(`{"name": "sec", "site": {"kind": "ssh", "config": %s},
		"template": {"cpus": 1, "memory_mb": 512, "lifetime": "10m", "idle_timeout": "5m",
		 "agent_args": ["-bind", "127.0.0.1:0", "-api", "127.0.0.1:0", "-gossip-profile", "fast", "-config", %q, "-cm-timeout", "30s"]},
		"limits": {"max_queued": 1, "max_running": 1}}`, siteJSON, conf)
	put := func(token string) (int, string) {
		req, _ := http.NewRequest("PUT", scheme+cm.APIAddr()+api.PathFactoryEntries+"sec", bytes.NewBufferString(entry))
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, _ := put(cmTok); code != http.StatusForbidden {
		t.Fatalf("a node token set an entry: %d", code)
	}
	if code, body := put(admin); code != http.StatusOK {
		t.Fatalf("PUT: %d %s", code, body)
	}
	t.Cleanup(func() {
		req, _ := http.NewRequest("DELETE", scheme+cm.APIAddr()+api.PathFactoryEntries+"sec", nil)
		req.Header.Set("Authorization", "Bearer "+admin)
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
		}
	})

	// A job, submitted with the administrator's token.
	owner := "root"
	sc := wire.NewClient(cm.APIAddr(), admin).WithTLS(clientTLS).Schedd()
	nc, err := sc.NewCluster(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	os.Chmod(work, 0o777)
	if _, err := sc.Submit(t.Context(), &wire.SubmitRequest{Cluster: nc.Cluster, Jobs: []wire.Ad{{
		"Owner": `"` + owner + `"`, "Cmd": `"/bin/sleep"`, "Arguments": `"3"`, "TransferExecutable": "false",
		"Iwd": `"` + work + `"`, "Out": `"/dev/null"`, "Err": `"/dev/null"`, "RequestMemory": "64", "RequestCpus": "1",
		"RequestDisk": "1024", "Requirements": "true", "JobUniverse": "5"}}}); err != nil {
		t.Fatal(err)
	}
	status := func() api.FactoryStatus {
		req, _ := http.NewRequest("GET", scheme+cm.APIAddr()+api.PathFactory, nil)
		req.Header.Set("Authorization", "Bearer "+admin)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var st api.FactoryStatus
		json.NewDecoder(resp.Body).Decode(&st)
		return st
	}
	waitFor(t, 90*time.Second, "the job done on a glidein with a delegated token", func() error {
		q, err := sc.Queue(t.Context(), &wire.QueryJobsRequest{})
		if err != nil {
			return err
		}
		if len(q) != 0 {
			return fmt.Errorf("%d jobs queued; factory %+v", len(q), status())
		}
		return nil
	})
	waitFor(t, 60*time.Second, "the token refreshed", func() error {
		st := status()
		if len(st.Entries) == 1 {
			for _, e := range st.Entries[0].Events {
				if e.What == "refreshed" {
					return nil
				}
			}
		}
		return fmt.Errorf("status %+v", st)
	})
	toks, _ := filepath.Glob(filepath.Join(srv.Dir, "base", "hosts", "*", "pond-campus-sec-*", "node.token"))
	if len(toks) != 1 {
		t.Fatalf("token files %v", toks)
	}
	if withTLS {
		// The glidein's certificate: issued by the delegated CA for its
		// own name, within the CA's life, its key beside it.
		certs, err := auth.ReadCertificates(filepath.Join(filepath.Dir(toks[0]), auth.NodeCertFile))
		if err != nil || len(certs) != 2 || certs[0].Subject.CommonName != filepath.Base(filepath.Dir(toks[0])) ||
			certs[1].URIs[0].Path != "/pond-campus-*" || certs[0].NotAfter.After(certs[1].NotAfter) {
			t.Fatalf("the glidein's certificate chain %v: %v", certs, err)
		}
		if fi, err := os.Stat(filepath.Join(filepath.Dir(toks[0]), auth.NodeKeyFile)); err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("the glidein's key: %v %v", fi, err)
		}
	}
	data, _ := os.ReadFile(toks[0])
	c, err := (&auth.Verifier{Issuer: authority.Issuer(), Delegated: []auth.DelegatedKey{{Key: fk.Public(),
		Limits: auth.KeyLimits{Name: "f", SubjectPrefix: "node/pond-campus-", Scopes: []auth.Scope{auth.Daemon, auth.SeaRead},
			MaxLifetime: life}}}}).Verify(strings.TrimSpace(string(data)))
	if err != nil || !strings.HasPrefix(c.Subject, "node/pond-campus-sec-") {
		t.Fatalf("the glidein's token: %+v, %v", c, err)
	}
}

// TestFactoryCARefused starts a central manager's agent with a delegated
// CA it must not use: one another sea's CA issued, or one in an agent
// that speaks no TLS. The agent refuses to start, saying why.
func TestFactoryCARefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	open := func(name string) *auth.Authority {
		a, err := auth.OpenAuthority(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	sea, other := open("sea"), open("other")
	cmDir := filepath.Join(dir, "cm-tls")
	os.MkdirAll(cmDir, 0o700)
	cert, key, ca, err := sea.WriteCertificate(cmDir, "cm", []string{"127.0.0.1"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := other.DelegateCA("pond-campus-", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	foreignFile := filepath.Join(dir, "foreign-ca.pem")
	os.WriteFile(foreignFile, foreign, 0o600)
	for _, tc := range []struct {
		name  string
		tlsOn bool
		want  string
	}{
		{"another sea's CA", true, "not a CA the sea's CA"},
		{"no TLS", false, "speaks no TLS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &agent.Config{Name: "cm", Role: "cm", Pool: "campus", Bind: "127.0.0.1:0", API: "127.0.0.1:0",
				GossipProfile: "fast", DataDir: filepath.Join(t.TempDir(), "cm"), InsecureAPI: true, FactoryCA: foreignFile,
				ConfigFile: fastCondor(t, "DAEMON_LIST = MASTER COLLECTOR NEGOTIATOR SCHEDD\n")}
			if tc.tlsOn {
				cfg.TLSCert, cfg.TLSKey, cfg.TLSCA = cert, key, ca
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			a, err := agent.New(ctx, cfg, slog.New(slog.DiscardHandler))
			if err == nil {
				done := make(chan struct{})
				go func() { a.Run(ctx); close(done) }()
				cancel()
				<-done
				t.Fatal("the agent started")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}

// TestFactoryRefreshesQueued runs the factory of a central manager whose
// sea requires tokens with a real Slurm entry whose glidein waits in the
// queue (the cluster's one node is taken) longer than its token lasts:
// the factory renews the token in the queued glidein's directory before
// it expires, with no pondctl, and GET /v1/factory shows when the
// entry's credentials expire.
func TestFactoryRefreshesQueued(t *testing.T) {
	t.Parallel()
	slurmtest.Require(t)
	c := slurmtest.Shared(t, 1)
	// The node taken: a glidein queues behind this job.
	blocker := strings.TrimSpace(c.Run(t, "sbatch", "--parsable", "--exclusive", "--wrap", "sleep 600"))
	t.Cleanup(func() { c.Command(context.Background(), "scancel", blocker).Run() })
	dir := t.TempDir()
	authority, err := auth.OpenAuthority(filepath.Join(dir, "auth"))
	if err != nil {
		t.Fatal(err)
	}
	admin, err := authority.Mint("pondctl", []auth.Scope{auth.SeaAdmin, auth.Administrator}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cmTok, _, err := authority.Issue("node/cm", []auth.Scope{auth.Daemon, auth.SeaRead}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	// Its tokens last 20s: renewed at half their life.
	const life = 20 * time.Second
	fk, err := authority.Delegate(auth.KeyLimits{Name: "factory campus", SubjectPrefix: "node/pond-campus-",
		Scopes: []auth.Scope{auth.Daemon, auth.SeaRead}, MaxLifetime: life})
	if err != nil {
		t.Fatal(err)
	}
	keyFile, tokFile := filepath.Join(dir, "factory.key"), filepath.Join(dir, "cm.token")
	if err := auth.WriteSigningKey(keyFile, fk); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(tokFile, []byte(cmTok+"\n"), 0o600)
	ctx, cancel := context.WithCancel(context.Background())
	cm, err := agent.New(ctx, &agent.Config{Name: "cm", Role: "cm", Pool: "campus", Bind: "127.0.0.1:0", API: "127.0.0.1:0",
		GossipProfile: "fast", DataDir: filepath.Join(dir, "cm"),
		TrustedKeys: filepath.Join(authority.Dir(), auth.TrustedKeysFile), TokenIssuer: authority.Issuer(),
		TokenFile: tokFile, FactoryKey: keyFile,
		ConfigFile: fastCondor(t, "DAEMON_LIST = MASTER COLLECTOR NEGOTIATOR SCHEDD\n")}, slog.New(slog.DiscardHandler))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cm.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	work := filepath.Join(t.TempDir(), "work")
	site, err := slurm.New(slurm.Config{Env: c.Env(), WorkDir: work})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		gs, _ := site.List(context.Background(), glidein.IDPrefix)
		for _, g := range gs {
			site.Cancel(context.Background(), g.ID)
		}
	})
	siteJSON, _ := json.Marshal(slurm.Config{Env: c.Env(), WorkDir: work})
	entry := fmt.Sprintf(`{"name": "q", "site": {"kind": "slurm", "config": %s},
		"template": {"cpus": 1, "memory_mb": 512, "lifetime": "10m", "idle_timeout": "5m"},
		"limits": {"max_queued": 1, "max_running": 1}}`, siteJSON)
	fc := api.NewClient(cm.APIAddr()).WithToken(admin)
	if err := fc.SetFactoryEntry(t.Context(), "q", json.RawMessage(entry)); err != nil {
		t.Fatal(err)
	}
	submitAs(t, cm, admin)

	// The entry's glideins: the shared cluster's history holds other
	// tests' too.
	prefix := api.FactoryPrefix("campus") + "q-"
	var id, first string
	waitFor(t, 30*time.Second, "a glidein queued", func() error {
		gs, err := site.List(t.Context(), prefix)
		if err != nil || len(gs) != 1 || gs[0].State != glidein.Queued {
			return fmt.Errorf("glideins %+v, %v", gs, err)
		}
		id = gs[0].ID
		data, err := os.ReadFile(filepath.Join(work, id, factory.TokenFile))
		first = string(data)
		return err
	})
	verify := func(tok string) *auth.Claims {
		t.Helper()
		cl, err := (&auth.Verifier{Issuer: authority.Issuer(), Delegated: []auth.DelegatedKey{{Key: fk.Public(),
			Limits: auth.KeyLimits{Name: "f", SubjectPrefix: "node/pond-campus-", Scopes: []auth.Scope{auth.Daemon, auth.SeaRead},
				MaxLifetime: life}}}}).Verify(strings.TrimSpace(tok))
		if err != nil || cl.Subject != "node/"+id {
			t.Fatalf("the glidein's token: %+v, %v", cl, err)
		}
		return cl
	}
	old := verify(first)
	st, err := fc.Factory(t.Context())
	if err != nil || len(st.Entries) != 1 || !st.Entries[0].CredentialsExpire.Equal(old.Expires) {
		t.Fatalf("the entry's credentials expire at %v, want its glidein's token's %v (%v)", st, old.Expires, err)
	}
	// Renewed before it expires, while the glidein is still queued.
	waitFor(t, life, "the queued glidein's token renewed", func() error {
		data, _ := os.ReadFile(filepath.Join(work, id, factory.TokenFile))
		if string(data) == first {
			return fmt.Errorf("the token is the one it was submitted with")
		}
		return nil
	})
	if time.Now().After(old.Expires) {
		t.Errorf("renewed after its token expired at %v", old.Expires)
	}
	data, _ := os.ReadFile(filepath.Join(work, id, factory.TokenFile))
	renewed := verify(string(data))
	if !renewed.Expires.After(old.Expires) {
		t.Errorf("the renewed token expires at %v, the old at %v", renewed.Expires, old.Expires)
	}
	if gs, _ := site.List(t.Context(), prefix); len(gs) != 1 || gs[0].State != glidein.Queued {
		t.Errorf("the glidein is no longer queued: %+v", gs)
	}
	waitFor(t, 10*time.Second, "the entry's credentials expire later", func() error {
		st, err := fc.Factory(t.Context())
		if err != nil || len(st.Entries) != 1 || st.Entries[0].CredentialsExpire.Before(renewed.Expires) {
			return fmt.Errorf("factory %+v, %v", st, err)
		}
		return nil
	})
}

// submitAs queues at cm one job of a minute, with token.
func submitAs(t *testing.T, cm *agent.Agent, token string) {
	t.Helper()
	sc := wire.NewClient(cm.APIAddr(), token).Schedd()
	nc, err := sc.NewCluster(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	os.Chmod(work, 0o777)
	if _, err := sc.Submit(t.Context(), &wire.SubmitRequest{Cluster: nc.Cluster, Jobs: []wire.Ad{{
		"Owner": `"root"`, "Cmd": `"/bin/sleep"`, "Arguments": `"60"`, "TransferExecutable": "false",
		"Iwd": `"` + work + `"`, "Out": `"/dev/null"`, "Err": `"/dev/null"`, "RequestMemory": "64", "RequestCpus": "1",
		"RequestDisk": "1024", "Requirements": "true", "JobUniverse": "5"}}}); err != nil {
		t.Fatal(err)
	}
}
