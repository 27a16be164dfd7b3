package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/overlay/console"
)

// seaConsole serves the web console of an agent (a central manager's) to
// a browser on this host: browsers speak no TLS with the sea's Ed25519
// certificates, so pondctl calls the agent with the sea's CA and serves
// the pages on loopback.
func (m *meta) seaConsole(ctx context.Context, args []string) int {
	fs := m.newFlagSet("sea console", "sea console [-sea ADDR] [-listen 127.0.0.1:PORT]")
	seaAddr := fs.String("sea", "", "API address of the central manager's agent")
	listen := fs.String("listen", "127.0.0.1:0", "loopback address to serve the console on")
	if err := fs.Parse(args); err != nil {
		return 1
	}
	addr, ok := m.seaAddrOrFail(*seaAddr)
	if !ok {
		return 1
	}
	if err := console.CheckLoopback(*listen); err != nil {
		return m.fail("Invalid -listen", err)
	}
	tlsCfg, err := auth.FindClientTLS(m.getenv, authorityRoot(m.dir))
	if err != nil {
		return m.fail("Cannot read the sea's CA", err)
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return m.fail("Cannot listen", err)
	}
	srv := &http.Server{Handler: console.Proxy(addr, tlsCfg), ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(m.stdout, "The console of %s is at http://%s/ui/ (log in with a token: pondctl token create -subject NAME -scope READ,SEA_READ). Ctrl-C stops it.\n", addr, ln.Addr())
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return m.fail("Serving the console", err)
	}
	return 0
}
