package agent

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/condor/wire"
	"github.com/pond-htc/pond/overlay/api"
)

// TestDaemonsUseRefreshedToken runs an agent that trusts a key and holds a
// node token, checks that its daemons' wire refuses a caller without a
// token, then replaces the token file with a new token and revokes the old
// one: a job submitted afterwards runs to its end, so every call between
// the daemons (reschedule, claim, activate, job report) presented the new
// token without a restart.
func TestDaemonsUseRefreshedToken(t *testing.T) {
	t.Parallel()
	key := mustKey(t)
	dir := t.TempDir()
	trusted := filepath.Join(dir, auth.TrustedKeysFile)
	if err := auth.WritePublicKeys(trusted, key.Public()); err != nil {
		t.Fatal(err)
	}
	mint := func(subject string, scopes ...auth.Scope) (string, string) {
		c := auth.Claims{Issuer: "sea-1", Subject: subject, Scopes: scopes, Expires: time.Now().Add(time.Hour)}
		c.ID = strconv.FormatInt(time.Now().UnixNano(), 36)
		tok, err := auth.Mint(key, c)
		if err != nil {
			t.Fatal(err)
		}
		return tok, c.ID
	}
	tokenFile := filepath.Join(dir, "node.token")
	first, firstID := mint("node/guarded", auth.Daemon, auth.SeaRead)
	if err := os.WriteFile(tokenFile, []byte(first+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "condor_config")
	if err := os.WriteFile(conf, []byte("NEGOTIATOR_INTERVAL = 1\nNEGOTIATOR_MIN_INTERVAL = 0\nUPDATE_INTERVAL = 1\nSTARTER_POLL_INTERVAL = 0.1s\nNUM_CPUS = 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a := startAgents(t, &Config{Name: "guarded", Role: "node", ConfigFile: conf, TrustedKeys: trusted, TokenIssuer: "sea-1", TokenFile: tokenFile})[0]
	ctx := context.Background()

	if _, err := wire.NewMaster(a.APIAddr(), "").Info(ctx); !isHTTP(err, 401) {
		t.Fatalf("master info without a token: %v, want 401", err)
	}
	reader, _ := mint("tester", auth.Read)
	if _, err := wire.NewMaster(a.APIAddr(), reader).Reconfig(ctx); !isHTTP(err, 403) {
		t.Fatalf("reconfig with READ: %v, want 403", err)
	}
	if _, err := wire.NewMaster(a.APIAddr(), reader).Info(ctx); err != nil {
		t.Fatalf("master info with READ: %v", err)
	}

	second, secondID := mint("node/guarded", auth.Daemon, auth.SeaRead)
	if err := os.WriteFile(tokenFile+".new", []byte(second+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tokenFile+".new", tokenFile); err != nil {
		t.Fatal(err)
	}
	// GET /v1/self names the token in use, never shows it.
	seaReader, _ := mint("tester", auth.SeaRead)
	self, err := api.NewClient(a.APIAddr()).WithToken(seaReader).Self(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if tk := self.Token; tk == nil || tk.Subject != "node/guarded" || tk.ID != secondID || tk.File != tokenFile ||
		time.Until(tk.Expires) < 50*time.Minute || time.Until(tk.Expires) > time.Hour {
		t.Errorf("/v1/self token %+v, want node/guarded's %s expiring in an hour", self.Token, secondID)
	}
	if raw, err := json.Marshal(self); err != nil || strings.Contains(string(raw), second) || strings.Contains(string(raw), first) {
		t.Errorf("/v1/self shows the token: %s, %v", raw, err)
	}
	if err := os.WriteFile(filepath.Join(dir, auth.RevokedFile), []byte(firstID+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	// The job's owner is a local account: a schedd running as root acts
	// as its owner for the job's files.
	owner := "root"
	if u, err := user.Current(); err == nil {
		owner = u.Username
	}
	alice, _ := mint(owner, auth.Write)
	sc := wire.NewSchedd(a.APIAddr(), alice)
	work := t.TempDir()
	os.Chmod(work, 0o777)
	nc, err := sc.NewCluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	job := wire.Ad{"Cmd": `"/bin/true"`, "TransferExecutable": "false", "Iwd": strconv.Quote(work), "Out": `"/dev/null"`,
		"Err": `"/dev/null"`, "RequestMemory": "16", "RequestCpus": "1", "RequestDisk": "1024", "Requirements": "true", "JobUniverse": "5"}
	if _, err := sc.Submit(ctx, &wire.SubmitRequest{Cluster: nc.Cluster, Jobs: []wire.Ad{job}}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		done, err := sc.History(ctx, &wire.QueryJobsRequest{Projection: []string{"Owner", "JobStatus"}})
		if err == nil && len(done) == 1 {
			if done[0].Ad["Owner"] != strconv.Quote(owner) || done[0].Ad["JobStatus"] != "4" {
				t.Fatalf("finished job %v, want %s's, completed", done[0].Ad, owner)
			}
			return
		}
		if time.Now().After(deadline) {
			q, _ := sc.Queue(ctx, &wire.QueryJobsRequest{})
			t.Fatalf("the job did not complete after the node's token was replaced: queue %v, history %v, %v", q, done, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func isHTTP(err error, status int) bool {
	var we *wire.Error
	return errors.As(err, &we) && we.Status == status
}

// TestNoNodeTokenWarns checks that an agent that checks tokens but has
// none to present for its daemons says so when it starts.
func TestNoNodeTokenWarns(t *testing.T) {
	t.Parallel()
	trusted := filepath.Join(t.TempDir(), auth.TrustedKeysFile)
	if err := auth.WritePublicKeys(trusted, mustKey(t).Public()); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		token bool
		warn  bool
	}{{"without a token file", false, true}, {"with a token file", true, false}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &Config{Name: "n", Role: "node", Bind: "127.0.0.1:0", API: "127.0.0.1:0", GossipProfile: "fast", DataDir: t.TempDir(),
				TrustedKeys: trusted, TokenIssuer: "sea-1"}
			if tc.token {
				cfg.TokenFile = filepath.Join(t.TempDir(), "node.token")
				if err := os.WriteFile(cfg.TokenFile, []byte("x.y.z\n"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			var buf syncBuffer
			ctx, cancel := context.WithCancel(context.Background())
			a, err := New(ctx, cfg, slog.New(slog.NewTextHandler(&buf, nil)))
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan struct{})
			go func() { a.Run(ctx); close(done) }()
			deadline := time.Now().Add(10 * time.Second)
			for !strings.Contains(buf.String(), "agent started") && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			cancel()
			<-done
			if got := strings.Contains(buf.String(), "has none to present"); got != tc.warn {
				t.Errorf("warned %v, want %v; log:\n%s", got, tc.warn, buf.String())
			}
		})
	}
}
