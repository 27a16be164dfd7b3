package daemon_test

import (
	"context"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/condor/collector/history"
	"github.com/pond-htc/pond/condor/daemon"
	"github.com/pond-htc/pond/condor/daemon/testpool"
	"github.com/pond-htc/pond/condor/wire"
)

// TestApplyRecordAuthorization sends the central manager the record of an
// apply with tokens of every kind: only one granting ADMINISTRATOR is let
// through, and the record is kept under that token's subject, whatever
// subject it claims; a node that trusts no keys (an open pool) takes none.
func TestApplyRecordAuthorization(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	n := testpool.Start(t, "cm", "", t.TempDir(), nil, testpool.Knobs{"DAEMON_LIST": "MASTER, COLLECTOR"})
	rec := history.ApplyRecord{Serial: 7, Command: "apply", User: "mallory", TokenSubject: "root",
		Changes: []history.ApplyChange{{Address: "pool.a", Action: "update", Attributes: []string{"config"}}}}
	for _, tt := range []struct {
		name  string
		token string
		want  int
	}{
		{"no token", "", 401},
		{"READ", testpool.Token(t, "reader", auth.Read), 403},
		{"WRITE", testpool.Token(t, "writer", auth.Write), 403},
		{"DAEMON (a node's)", testpool.Token(t, "node/x", auth.Daemon), 403},
		{"ADVERTISE_MASTER", testpool.Token(t, "node/y", auth.AdvertiseMaster), 403},
		{"SEA_ADMIN", testpool.Token(t, "sea", auth.SeaAdmin), 403},
		{"ADMINISTRATOR", testpool.Token(t, "alice", auth.Administrator), 200},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := wire.NewClient(n.Addr, tt.token).Collector().RecordApply(ctx, &rec)
			if got := status(err); got != tt.want {
				t.Errorf("HTTP %d (%v), want %d", got, err, tt.want)
			}
		})
	}
	var rep history.Report
	testpool.Eventually(t, 10*time.Second, "the record", func() bool {
		rep = history.Report{}
		err := n.Client().Collector().History(ctx, &wire.HistoryRequest{Since: time.Now().Add(-time.Hour).Unix()}, &rep)
		return err == nil && len(rep.Applies) > 0
	})
	if len(rep.Applies) != 1 {
		t.Fatalf("%d records kept, want the administrator's alone: %+v", len(rep.Applies), rep.Applies)
	}
	if got := rep.Applies[0]; got.TokenSubject != "alice" || got.User != "mallory" || got.Serial != 7 {
		t.Errorf("kept %+v; want the subject alice, as authenticated", got)
	}

	// A node that trusts no keys lets every request through to the
	// daemons: the collector itself refuses an unauthenticated record.
	open, err := testpool.StartWith("open", "", t.TempDir(), nil, testpool.Config(t, testpool.FastKnobs(), testpool.Knobs{"DAEMON_LIST": "MASTER, COLLECTOR"}), func(o *daemon.Options) { o.Verifier = nil })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { open.Stop() })
	if got := status(wire.NewClient(open.Addr, "").Collector().RecordApply(ctx, &rec)); got != 403 {
		t.Errorf("an open pool's collector: HTTP %d, want 403", got)
	}
}
