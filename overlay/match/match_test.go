package match

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestHandlerRefuses checks that POST /v1/match refuses, before it asks
// the sea anything, a body that is no request, a negative timeout and an
// expression that does not parse, each with 400 and why.
func TestHandlerRefuses(t *testing.T) {
	h := Handler(nil) // a request that reached the sea would panic
	for _, tt := range []struct{ name, body, want string }{
		{"not JSON", `{`, "body"},
		{"negative timeout", `{"requirements": "true", "timeout": -1}`, "timeout: must not be negative"},
		{"bad requirements", `{"requirements": "Cpus >"}`, "requirements"},
	} {
		w := httptest.NewRecorder()
		h(w, httptest.NewRequest("POST", "/v1/match", strings.NewReader(tt.body)))
		if w.Code != http.StatusBadRequest || !strings.Contains(strings.ToLower(w.Body.String()), tt.want) {
			t.Errorf("%s: %d %s, want 400 with %q", tt.name, w.Code, w.Body, tt.want)
		}
	}
}
