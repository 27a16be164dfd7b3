package aws

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/pond-htc/pond/providers"
	"github.com/pond-htc/pond/providers/providertest"
	"github.com/zclconf/go-cty/cty"
)

// syncBuffer is a bytes.Buffer safe for the logger's and the test's use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestSDKLogsGoToPondLogger: off EC2, with no credentials of its own, the
// SDK asks the metadata service for them, whose refusal of IMDSv2 makes
// it warn that it falls back to IMDSv1. The warning goes to the logger
// pondctl gives the provider (POND_LOG's), at WARN, and only there: never
// to the terminal, and nowhere when the logger's level is above it.
func TestSDKLogsGoToPondLogger(t *testing.T) {
	// A metadata service that refuses IMDSv2's token and knows no role.
	imds := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "forbidden", http.StatusForbidden)
	}))
	defer imds.Close()
	t.Setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", imds.URL)
	t.Setenv("AWS_EC2_METADATA_DISABLED", "false")
	for _, v := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
		"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN"} {
		t.Setenv(v, "")
		os.Unsetenv(v)
	}
	none := filepath.Join(t.TempDir(), "none")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", none)
	t.Setenv("AWS_CONFIG_FILE", none)
	t.Setenv("AWS_REGION", "us-east-1")

	for _, tc := range []struct {
		name  string
		level slog.Level
		want  bool
	}{
		{"POND_LOG=warn", slog.LevelWarn, true},
		{"POND_LOG=error", slog.LevelError, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// What the process writes to its stderr meanwhile: the
			// terminal.
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			stderr := os.Stderr
			os.Stderr = w
			var term bytes.Buffer
			copied := make(chan struct{})
			go func() { io.Copy(&term, r); close(copied) }()
			restore := func() {
				if os.Stderr == w {
					os.Stderr = stderr
					w.Close()
					<-copied
				}
			}
			defer restore()

			var logs syncBuffer
			logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: tc.level}))
			p := New()
			cfg, err := providertest.Object(p.Schema().Provider, map[string]cty.Value{
				"ami":            cty.StringVal("ami-12345678"),
				"instance_types": cty.ListVal([]cty.Value{cty.StringVal("t3.micro")}),
				// Nothing listens there: no request gets that far.
				"endpoint":     cty.StringVal("http://127.0.0.1:1"),
				"bind_address": cty.StringVal("127.0.0.1"),
			})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if err := providers.Err(p.Configure(ctx, providers.ConfigureRequest{Config: cfg, WorkDir: t.TempDir(), Logger: logger}).Diagnostics); err != nil {
				t.Fatal(err)
			}
			rs := p.Schema().Resources["glidein"]
			gc, err := providertest.Object(rs, map[string]cty.Value{"pool": cty.StringVal("127.0.0.1:1"), "nodes": cty.NumberIntVal(1)})
			if err != nil {
				t.Fatal(err)
			}
			plan := p.PlanResourceChange(ctx, providers.PlanRequest{TypeName: "glidein", Address: "glidein.burst",
				Prior: cty.NullVal(rs.ImpliedType()), Config: gc, ProposedNew: gc})
			if providers.Err(plan.Diagnostics) == nil {
				t.Fatal("plan without credentials succeeded")
			}
			restore()
			if strings.Contains(term.String(), "IMDSv1") {
				t.Errorf("the SDK wrote to the terminal:\n%s", term.String())
			}
			got := logs.String()
			if has := strings.Contains(got, "level=WARN") && strings.Contains(got, "falling back to IMDSv1") && strings.Contains(got, "source=aws-sdk"); has != tc.want {
				t.Errorf("pond's log at %s has the SDK's IMDSv1 warning: %v, want %v:\n%s", tc.level, has, tc.want, got)
			}
		})
	}
}
