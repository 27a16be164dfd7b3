package providers

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestProbeSea checks that ProbeSea fails only when nothing answers at the
// address: nothing listening, no port, or a listener that never answers
// within the bound; and that a server which answers, even with a refusal
// or over TLS the working directory cannot verify, passes.
func TestProbeSea(t *testing.T) {
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closed.Addr().String()
	closed.Close()

	// A listener whose connections are accepted and never answered.
	mute, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer mute.Close()
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := mute.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()

	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no token", http.StatusUnauthorized)
	}))
	defer refusing.Close()
	otherCA := httptest.NewTLSServer(http.NotFoundHandler())
	defer otherCA.Close()

	for _, tc := range []struct {
		name, addr string
		want       string // in the error; "" for none
	}{
		{"nothing listens", closedAddr, "connection refused"},
		{"never answers", mute.Addr().String(), "deadline exceeded"},
		{"refuses", strings.TrimPrefix(refusing.URL, "http://"), ""},
		{"another sea's TLS", strings.TrimPrefix(otherCA.URL, "https://"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("POND_AUTHORITY", "")
			t.Setenv("POND_TLS_CA", "")
			ctx, cancel := context.WithTimeout(t.Context(), time.Second)
			defer cancel()
			err := ProbeSea(ctx, t.TempDir(), tc.addr)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("ProbeSea: %v, want nil: something answered", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("ProbeSea: %v, want an error saying %q", err, tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), "asked the agent at "+tc.addr+" who it is (GET /v1/self"):
				t.Fatalf("ProbeSea: %v does not say what was tried", err)
			}
		})
	}
}
