package ec2

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"testing"
)

// recordingProxy is a proxy in front of endpoint that shows seen the
// form of every EC2 query request, one at a time.
func recordingProxy(t *testing.T, endpoint string, seen func(form map[string]string)) string {
	t.Helper()
	target, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if vals, err := url.ParseQuery(string(body)); err == nil {
			form := map[string]string{}
			for k, v := range vals {
				form[k] = v[0]
			}
			mu.Lock()
			seen(form)
			mu.Unlock()
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}
