package schedd

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/config"
	"github.com/pond-htc/pond/condor/internal/asuser"
	"github.com/pond-htc/pond/condor/wire"
)

// TestFailedAdvertiseIsMadeAgainSoon has the collector refuse the
// schedd's updates for its first 1.5 seconds (those its start makes):
// the schedd sends its ads again within seconds, not at its next
// UPDATE_INTERVAL (300 s here).
func TestFailedAdvertiseIsMadeAgainSoon(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	refuseUntil := time.Now().Add(1500 * time.Millisecond)
	taken := make(chan string, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/update") {
			http.NotFound(w, r)
			return
		}
		if calls.Add(1); time.Now().Before(refuseUntil) {
			http.Error(w, "too busy", http.StatusServiceUnavailable)
			return
		}
		taken <- r.URL.Path
		wire.WriteJSON(w, http.StatusOK, wire.UpdateResponse{})
	}))
	defer srv.Close()
	cfg := config.New(config.Options{})
	if err := cfg.Set("UPDATE_INTERVAL", "300"); err != nil {
		t.Fatal(err)
	}
	addr := srv.Listener.Addr().String()
	s, err := New(context.Background(), Options{Config: cfg, Name: "schedd@submit", Address: "127.0.0.1:9618", DataDir: t.TempDir(),
		Collector: func() string { return addr }, Account: func(string) (*asuser.Account, error) { return nil, nil }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Run(ctx) }()
	defer func() { cancel(); <-done; s.Close() }()
	select {
	case <-taken:
	case <-time.After(20 * time.Second):
		t.Fatalf("no update taken within 20 s once the collector took them (%d calls)", calls.Load())
	}
}
