package cedartest

import (
	"context"
	"net"
	"testing"

	"github.com/pond-htc/pond/condor/cedar"
)

// Serve runs srv on a loopback listener until the test ends and returns
// the listener's address.
func Serve(tb testing.TB, srv *cedar.Server) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go srv.ServeConn(context.Background(), c, nil)
		}
	}()
	return ln.Addr().String()
}
