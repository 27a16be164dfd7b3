package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
)

type claimsKey struct{}

// FromContext returns the claims of the request Require let through.
func FromContext(ctx context.Context) (*Claims, bool) {
	c, ok := ctx.Value(claimsKey{}).(*Claims)
	return c, ok
}

// WithClaims returns ctx carrying c, as Require passes a verified caller's
// claims on, for a server that authenticated the caller another way (a
// CEDAR handshake).
func WithClaims(ctx context.Context, c *Claims) context.Context {
	return context.WithValue(ctx, claimsKey{}, c)
}

// BearerToken is the token of an "Authorization: Bearer TOKEN" header, or
// "".
func BearerToken(r *http.Request) string {
	h := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(tok)
}

// Require serves h only to requests whose bearer token v accepts and
// whose claims grant need. A request without a valid token gets 401 and
// one whose token lacks the scope 403; neither reaches h. h finds the
// caller's claims with FromContext.
func Require(v *Verifier, need Scope, h http.Handler) http.Handler {
	return RequireAny(v, []Scope{need}, h)
}

// RequireAny is Require for a route that several scopes may call, such as
// a collector's update, which each kind of daemon makes with its own
// ADVERTISE_* scope: the claims must grant at least one of needs, and h
// checks the one the request needs once it has read it.
func RequireAny(v *Verifier, needs []Scope, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := v.Verify(BearerToken(r))
		if err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="pond"`)
			deny(w, http.StatusUnauthorized, err)
			return
		}
		if !slices.ContainsFunc(needs, c.Allows) {
			names := make([]string, len(needs))
			for i, s := range needs {
				names[i] = s.Name()
			}
			deny(w, http.StatusForbidden, fmt.Errorf("%s's token does not grant %s", c.Subject, strings.Join(names, " or ")))
			return
		}
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), claimsKey{}, c)))
	})
}

// deny answers a refused request with {"error": ...}. An invalid token's
// detail (which key, which claim) stays out of the answer: the caller
// learns only why in general.
func deny(w http.ResponseWriter, code int, err error) {
	msg := err.Error()
	for _, e := range []error{ErrNoToken, ErrInvalid, ErrExpired, ErrRevoked} {
		if errors.Is(err, e) {
			msg = e.Error()
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}
