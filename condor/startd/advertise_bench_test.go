package startd

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/pond-htc/pond/condor/collector"
	"github.com/pond-htc/pond/condor/config"
	"github.com/pond-htc/pond/condor/wire"
)

// BenchmarkCollectorUpdatePerChange times what one slot's change costs
// the collector (decoding the update, parsing its ads, storing them) on a
// node of 100 static slots: "full" is the update of all 100 ads a change
// sent before partial updates, "partial" the update of the changed slot's
// ad alone. The ads are a real startd's.
func BenchmarkCollectorUpdatePerChange(b *testing.B) {
	cfg := map[string]string{"NUM_SLOTS": "100", "NUM_CPUS": "100", "MEMORY": "100000"}
	c := config.New(config.Options{})
	for k, v := range cfg {
		if err := c.Set(k, v); err != nil {
			b.Fatal(err)
		}
	}
	st, err := New(Options{Config: c, Name: "node1", Address: "127.0.0.1:1", DataDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(st.shutdown)
	ups := st.slotUpdates()
	full := wire.UpdateRequest{Type: wire.TypeMachine, Source: st.source(), Private: map[string]wire.Ad{}}
	for _, u := range ups {
		full.Ads = append(full.Ads, u.ad)
		if u.private != nil {
			full.Private[u.name] = u.private
		}
	}
	partial := wire.UpdateRequest{Type: wire.TypeMachine, Source: st.source(), Partial: true,
		Ads: []wire.Ad{ups[41].ad}, Private: map[string]wire.Ad{ups[41].name: ups[41].private}}
	for _, bc := range []struct {
		name string
		req  wire.UpdateRequest
	}{{"full", full}, {"partial", partial}} {
		b.Run(bc.name, func(b *testing.B) {
			c := collector.New(collector.Options{})
			h := c.Handler()
			post := func(body []byte) {
				w := httptest.NewRecorder()
				h.ServeHTTP(w, httptest.NewRequestWithContext(context.Background(), http.MethodPost, "/update", bytes.NewReader(body)))
				if w.Code != http.StatusOK {
					b.Fatalf("update: %d %s", w.Code, w.Body)
				}
			}
			first, err := json.Marshal(&full)
			if err != nil {
				b.Fatal(err)
			}
			post(first)
			body, err := json.Marshal(&bc.req)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				post(body)
			}
		})
	}
}
