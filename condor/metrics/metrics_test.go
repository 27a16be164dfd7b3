package metrics

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestTop(t *testing.T) {
	tests := []struct {
		in   map[string]float64
		n    int
		want map[string]float64
	}{
		{map[string]float64{"a": 1, "b": 2}, 2, map[string]float64{"a": 1, "b": 2}},
		{map[string]float64{"a": 1, "b": 5, "c": 3, "d": 1}, 2, map[string]float64{"b": 5, "c": 3, Other: 2}},
		// Ties by name: a before d.
		{map[string]float64{"d": 1, "a": 1, "b": 1}, 1, map[string]float64{"a": 1, Other: 2}},
	}
	for i, tt := range tests {
		if got := Top(tt.in, tt.n); !cmp.Equal(got, tt.want) {
			t.Errorf("%d: Top = %v, want %v", i, got, tt.want)
		}
	}
}

func TestCredentials(t *testing.T) {
	dir := t.TempDir()
	notAfter := time.Unix(1_900_000_000, 0)
	cert := filepath.Join(dir, "cert.pem")
	writeCert(t, cert, notAfter)
	garbage := filepath.Join(dir, "garbage.pem")
	if err := os.WriteFile(garbage, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := Credentials{
		{Kind: "tls_certificate", Expiry: func() (time.Time, bool, error) { return CertificateExpiry(cert) }},
		{Kind: "factory_ca", Expiry: func() (time.Time, bool, error) { return CertificateExpiry(garbage) }},
		{Kind: "node_token", Expiry: func() (time.Time, bool, error) { return time.Time{}, false, errors.New("unreadable") }},
	}
	want := fmt.Sprintf(`
# HELP pond_credential_expiry_timestamp_seconds When a credential of the agent expires, in seconds since 1970: the node token, the TLS certificate, the pilot factory's delegated CA.
# TYPE pond_credential_expiry_timestamp_seconds gauge
pond_credential_expiry_timestamp_seconds{kind="tls_certificate"} %d
# HELP pond_credential_read_errors 1 when a credential of the agent cannot be read at the scrape (its expiry is then missing).
# TYPE pond_credential_read_errors gauge
pond_credential_read_errors{kind="factory_ca"} 1
pond_credential_read_errors{kind="node_token"} 1
pond_credential_read_errors{kind="tls_certificate"} 0
`, notAfter.Unix())
	if err := testutil.CollectAndCompare(c, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	// A renewed certificate shows at the next scrape.
	writeCert(t, cert, notAfter.Add(time.Hour))
	if got, _, _ := CertificateExpiry(cert); !got.Equal(notAfter.Add(time.Hour)) {
		t.Errorf("renewed certificate expires %v", got)
	}
}

func writeCert(t *testing.T, path string, notAfter time.Time) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: notAfter.Add(-time.Hour), NotAfter: notAfter}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// FuzzCertificateExpiry: any file content gives an expiry or an error,
// never a panic.
func FuzzCertificateExpiry(f *testing.F) {
	f.Add([]byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"))
	f.Add([]byte("garbage"))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, b []byte) {
		p := filepath.Join(dir, "c.pem")
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, ok, err := CertificateExpiry(p); ok == (err != nil) {
			t.Fatalf("ok %v with err %v", ok, err)
		}
	})
}
