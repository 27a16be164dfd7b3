package wire

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestToken(t *testing.T) {
	if Token("") != "" {
		t.Error("empty secret must give an open pool")
	}
	a1, a2 := Token("a"), Token("a")
	if a1 == Token("b") || a1 != a2 || strings.Contains(Token("secret"), "secret") {
		t.Error("tokens must be deterministic, distinct per secret and not reveal it")
	}
}

func TestCallAndAuth(t *testing.T) {
	type in struct{ X int }
	type out struct{ Y int }
	h := Handle(func(ctx context.Context, r *in) (*out, error) {
		switch r.X {
		case 0:
			return nil, errors.Join(ErrBadRequest, errors.New("x is zero"))
		case -1:
			return nil, ErrNotFound
		}
		return &out{Y: r.X * 2}, nil
	})
	mux := http.NewServeMux()
	mux.Handle(PathPrefix+"test/double", h)
	srv := httptest.NewServer(RequireToken(Token("pw"), mux))
	defer srv.Close()
	addr := srv.Listener.Addr().String()
	tests := []struct {
		name   string
		token  string
		x      int
		want   int
		status int
	}{
		{"ok", Token("pw"), 21, 42, 0},
		{"bad request", Token("pw"), 0, 0, 400},
		{"not found", Token("pw"), -1, 0, 404},
		{"outsider", Token("other"), 1, 0, 401},
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

func TestFindSecretFile(t *testing.T) {
	root := t.TempDir()
	wd := filepath.Join(root, "wd")
	sub := filepath.Join(wd, "jobs", "deep")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(wd, ".pond"), 0o755); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(wd, filepath.FromSlash(SecretFile))
	if err := os.WriteFile(secret, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ dir, want string }{
		{wd, secret},
		{sub, secret},
		{root, ""},
		{"", ""},
	} {
		if got := FindSecretFile(tt.dir); got != tt.want {
			t.Errorf("FindSecretFile(%q) = %q, want %q", tt.dir, got, tt.want)
		}
	}
	if s, err := ReadSecretFile(secret); err != nil || s != "s3cret" {
		t.Errorf("ReadSecretFile = %q, %v; want s3cret", s, err)
	}
	empty := filepath.Join(root, "empty")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadSecretFile(empty); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Errorf("ReadSecretFile of an empty file: %v, want an error saying so", err)
	}
}
