package relay

import (
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/auth"
)

// BenchmarkTunnelHTTP measures an HTTP request to a worker through its
// relay, on a kept-alive connection and on a new connection each time.
func BenchmarkTunnelHTTP(b *testing.B) {
	_, relayAddr, mint := testRelay(b, Config{Name: "cm"})
	tok := mint(time.Hour, "node/w1", auth.Daemon)
	c, err := Connect(b.Context(), &Dialer{Relay: relayAddr, Name: "w1", Token: func() string { return tok }}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	serveHTTP(b, c.API())
	for _, keep := range []bool{true, false} {
		name := "new-conn"
		if keep {
			name = "keep-alive"
		}
		b.Run(name, func(b *testing.B) {
			hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: !keep}}
			for b.Loop() {
				resp, err := hc.Get("http://" + c.Addrs().API + "/")
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
}
