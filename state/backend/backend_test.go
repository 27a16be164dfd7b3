package backend

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pond-htc/pond/state/backend/local"
	"github.com/pond-htc/pond/state/backend/s3"
)

func TestNew(t *testing.T) {
	work := t.TempDir()
	tests := []struct {
		name      string
		typ       string
		cfg       map[string]string
		wantLocal string // expected local path, when local
		wantS3    string // expected URL, when s3
		err       string
	}{
		{name: "default is local", wantLocal: filepath.Join(work, "pond.state")},
		{name: "local default path", typ: "local", cfg: map[string]string{}, wantLocal: filepath.Join(work, "pond.state")},
		{name: "local relative path", typ: "local", cfg: map[string]string{"path": "st/x.state"}, wantLocal: filepath.Join(work, "st/x.state")},
		{name: "local absolute path", typ: "local", cfg: map[string]string{"path": "/tmp/abs.state"}, wantLocal: "/tmp/abs.state"},
		{name: "s3", typ: "s3", cfg: map[string]string{"bucket": "b", "key": "k/pond.state", "region": "eu-west-1", "endpoint": "http://127.0.0.1:1", "force_path_style": "true"}, wantS3: "s3://b/k/pond.state"},
		{name: "unknown type", typ: "consul", err: `unknown backend type "consul": pond has "local" and "s3"`},
		{name: "unknown local setting", typ: "local", cfg: map[string]string{"paht": "x"}, err: `backend "local": unknown setting "paht" (settings: path)`},
		{name: "unknown s3 setting", typ: "s3", cfg: map[string]string{"bucket": "b", "key": "k", "dynamodb_table": "t"}, err: `backend "s3": unknown setting "dynamodb_table"`},
		{name: "missing bucket", typ: "s3", cfg: map[string]string{"key": "k", "region": "r"}, err: `backend "s3": setting "bucket" is required`},
		{name: "missing key", typ: "s3", cfg: map[string]string{"bucket": "b", "region": "r"}, err: `backend "s3": setting "key" is required`},
		{name: "bad force_path_style", typ: "s3", cfg: map[string]string{"bucket": "b", "key": "k", "region": "r", "force_path_style": "maybe"}, err: `setting "force_path_style" is "maybe", want true or false`},
		{name: "bad key", typ: "s3", cfg: map[string]string{"bucket": "b", "key": "/k", "region": "r"}, err: `must not begin or end with /`},
		{name: "half credentials", typ: "s3", cfg: map[string]string{"bucket": "b", "key": "k", "region": "r", "access_key": "a"}, err: `"access_key" and "secret_key" must be given together`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := New(context.Background(), tt.typ, tt.cfg, work)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("New error = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			switch b := b.(type) {
			case *local.Backend:
				if b.Path() != tt.wantLocal {
					t.Fatalf("local path = %s, want %s", b.Path(), tt.wantLocal)
				}
			case *s3.Backend:
				if b.URL() != tt.wantS3 {
					t.Fatalf("s3 URL = %s, want %s", b.URL(), tt.wantS3)
				}
			default:
				t.Fatalf("New returned %T", b)
			}
		})
	}
}

func TestNewS3WithoutRegion(t *testing.T) {
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	_, err := New(context.Background(), "s3", map[string]string{"bucket": "b", "key": "k"}, "")
	if err == nil || !strings.Contains(err.Error(), `no region: set "region", AWS_REGION or a profile's region`) {
		t.Fatalf("New error = %v", err)
	}
	t.Setenv("AWS_REGION", "eu-north-1")
	if _, err := New(context.Background(), "s3", map[string]string{"bucket": "b", "key": "k"}, ""); err != nil {
		t.Fatalf("region from AWS_REGION: %v", err)
	}
}
