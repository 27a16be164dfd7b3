package ec2

import (
	"bytes"
	"fmt"
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
	return faultProxy(t, endpoint, func(form map[string]string) string { seen(form); return "" })
}

// faultProxy is a proxy in front of endpoint that shows answer the form
// of every EC2 query request, one at a time: when answer returns an error
// code, the request gets that EC2 error instead of moto's answer.
func faultProxy(t *testing.T, endpoint string, answer func(form map[string]string) string) string {
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
			code := answer(form)
			mu.Unlock()
			if code != "" {
				w.Header().Set("Content-Type", "text/xml")
				w.WriteHeader(http.StatusBadRequest)
				fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Response><Errors><Error><Code>%s</Code><Message>injected by the test</Message></Error></Errors><RequestID>test</RequestID></Response>`, code)
				return
			}
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}
