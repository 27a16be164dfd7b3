package factory_test

import (
	"bytes"
	"context"
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
	"github.com/pond-htc/pond/overlay/glidein/ssh/sshtest"
)

// TestFactoryDelegatedTokens runs the factory of a central manager whose
// sea requires tokens, configured through its API: it holds only a
// delegated key (-factory-key), gives each glidein a node token signed
// with it, and the glidein joins and runs a job; the factory then
// refreshes the token in the running glidein's directory, and the agent
// goes on with the new one. Calls without the admin scope cannot set an
// entry.
func TestFactoryDelegatedTokens(t *testing.T) {
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
	// The delegated key's tokens last at most 5m: the factory refreshes
	// them at half their life, and once at once.
	fk, err := authority.Delegate(auth.KeyLimits{Name: "factory campus", SubjectPrefix: "node/pond-campus-",
		Scopes: []auth.Scope{auth.Daemon, auth.SeaRead}, MaxLifetime: 5 * time.Minute})
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
		req, _ := http.NewRequest("PUT", "http://"+cm.APIAddr()+api.PathFactoryEntries+"sec", bytes.NewBufferString(entry))
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
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
		req, _ := http.NewRequest("DELETE", "http://"+cm.APIAddr()+api.PathFactoryEntries+"sec", nil)
		req.Header.Set("Authorization", "Bearer "+admin)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	})

	// A job, submitted with the administrator's token.
	owner := "root"
	sc := wire.NewSchedd(cm.APIAddr(), admin)
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
		req, _ := http.NewRequest("GET", "http://"+cm.APIAddr()+api.PathFactory, nil)
		req.Header.Set("Authorization", "Bearer "+admin)
		resp, err := http.DefaultClient.Do(req)
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
	waitFor(t, 30*time.Second, "the token refreshed", func() error {
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
	data, _ := os.ReadFile(toks[0])
	c, err := (&auth.Verifier{Issuer: authority.Issuer(), Delegated: []auth.DelegatedKey{{Key: fk.Public(),
		Limits: auth.KeyLimits{Name: "f", SubjectPrefix: "node/pond-campus-", Scopes: []auth.Scope{auth.Daemon, auth.SeaRead},
			MaxLifetime: 5 * time.Minute}}}}).Verify(strings.TrimSpace(string(data)))
	if err != nil || !strings.HasPrefix(c.Subject, "node/pond-campus-sec-") {
		t.Fatalf("the glidein's token: %+v, %v", c, err)
	}
}
