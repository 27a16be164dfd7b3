package acceptance

import (
	"net/http"
	"path/filepath"
	"strings"

	"github.com/pond-htc/pond/condor/auth"
)

// getenv reads the working directory's pondctl environment.
func (w *workdir) getenv(name string) string {
	v := ""
	for _, kv := range w.env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == name {
			v = val
		}
	}
	return v
}

// joinSeaOf makes w's pools join the sea of other's working directory:
// w's pondctl issues its nodes' certificates (and tokens) with other's
// authority, so that they prove they belong to that sea.
func (w *workdir) joinSeaOf(other *workdir) {
	w.env = append(w.env, "POND_AUTHORITY="+filepath.Join(other.dir, ".pond", "auth"))
}

// agentGet sends GET path to the agent API at addr as the working
// directory's pondctl would: over TLS with the sea's CA once there is one,
// presenting the working directory's token.
func (w *workdir) agentGet(addr, path string) (*http.Response, error) {
	cfg, err := auth.FindClientTLS(w.getenv, w.dir)
	if err != nil {
		return nil, err
	}
	scheme, c := "http://", http.DefaultClient
	if cfg != nil {
		scheme, c = "https://", &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}
		defer c.CloseIdleConnections()
	}
	req, err := http.NewRequest(http.MethodGet, scheme+addr+path, nil)
	if err != nil {
		return nil, err
	}
	if tok := w.token(); tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	return c.Do(req)
}
