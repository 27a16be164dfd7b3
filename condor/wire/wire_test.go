package wire

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/auth"
)

func TestCallAndAuth(t *testing.T) {
	type in struct{ X int }
	type out struct{ Y int }
	h := Handle(func(ctx context.Context, r *in) (*out, error) {
		switch r.X {
		case 0:
			return nil, errors.Join(ErrBadRequest, errors.New("x is zero"))
		case -1:
			return nil, ErrNotFound
		case -2:
			// A handler that asks for more than its route did.
			if err := Authorize(ctx, auth.Administrator); err != nil {
				return nil, err
			}
		}
		return &out{Y: r.X * 2}, nil
	})
	key, err := auth.NewSigningKey()
	if err != nil {
		t.Fatal(err)
	}
	other, err := auth.NewSigningKey()
	if err != nil {
		t.Fatal(err)
	}
	mint := func(k *auth.SigningKey, s auth.Scope) string {
		tok, err := auth.Mint(k, auth.Claims{Issuer: "pool", Subject: "alice", Scopes: []auth.Scope{s}, Expires: time.Now().Add(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	v := &auth.Verifier{Issuer: "pool", Keys: []ed25519.PublicKey{key.Public()}}
	mux := http.NewServeMux()
	mux.Handle(PathPrefix+"test/double", auth.Require(v, auth.Write, h))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	addr := srv.Listener.Addr().String()
	writer := mint(key, auth.Write)
	tests := []struct {
		name   string
		token  string
		x      int
		want   int
		status int
	}{
		{"ok", writer, 21, 42, 0},
		{"bad request", writer, 0, 0, 400},
		{"not found", writer, -1, 0, 404},
		{"handler asks for more", writer, -2, 0, 403},
		{"administrator", mint(key, auth.Administrator), -2, -4, 0},
		{"outsider", mint(other, auth.Write), 1, 0, 401},
		{"scope too low", mint(key, auth.Read), 1, 0, 403},
		{"no token", "", 1, 0, 401},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var o out
			err := NewClient(addr, tt.token).Call(context.Background(), "test/double", &in{X: tt.x}, &o)
			var we *Error
			switch {
			case tt.status == 0 && (err != nil || o.Y != tt.want):
				t.Errorf("got %v, %v; want %d", o, err, tt.want)
			case tt.status != 0 && (!errors.As(err, &we) || we.Status != tt.status):
				t.Errorf("got %v, want HTTP %d", err, tt.status)
			}
		})
	}
}

// TestAuthorizeOpen checks that a request without claims (an open pool)
// is authorized.
func TestAuthorizeOpen(t *testing.T) {
	if err := Authorize(context.Background(), auth.Administrator); err != nil {
		t.Errorf("Authorize without claims: %v", err)
	}
}

// FuzzDecodeAd checks that no request body makes ad decoding panic.
func FuzzDecodeAd(f *testing.F) {
	f.Add(`{"Name":"\"slot1@a\"","Memory":"1024","Requirements":"TARGET.Memory > 2"}`)
	f.Add(`{"A":"1 +"}`)
	f.Add(`{"A":"[ b = 1; c = b + 1 ]"}`)
	f.Fuzz(func(t *testing.T, s string) {
		var a Ad
		if json.Unmarshal([]byte(s), &a) != nil {
			return
		}
		ad, err := ToClassAd(a)
		if err != nil {
			return
		}
		back := FromClassAd(ad)
		if _, err := ToClassAd(back); err != nil {
			t.Fatalf("re-parsing %v: %v", back, err)
		}
	})
}
