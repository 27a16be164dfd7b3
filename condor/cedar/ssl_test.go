package cedar_test

import (
	"crypto/tls"
	"crypto/x509"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/condor/cedar"
)

// TestSSLFromHTCondorClient checks the SSL method against HTCondor's
// Python client: a client certificate of the sea's CA is answered, with
// the identity its common name; none, or one of another CA, is refused
// with the client's own error, and the server serves on.
func TestSSLFromHTCondorClient(t *testing.T) {
	a, err := auth.OpenAuthority(filepath.Join(t.TempDir(), "auth"))
	if err != nil {
		t.Fatal(err)
	}
	other, err := auth.OpenAuthority(filepath.Join(t.TempDir(), "other"))
	if err != nil {
		t.Fatal(err)
	}
	srvCert, srvKey, caFile, err := a.WriteCertificate(t.TempDir(), "cm", []string{"127.0.0.1", "localhost"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := auth.ServerTLS(srvCert, srvKey, caFile)
	if err != nil {
		t.Fatal(err)
	}
	var granted []string
	log := &syncBuffer{}
	ipAddr, _, _ := serveCollector(t, log, &cedar.SSL{
		Config: func() (*tls.Config, error) { return cfg, nil },
		Grant: func(c *x509.Certificate) *auth.Claims {
			granted = append(granted, c.Subject.CommonName)
			return &auth.Claims{Subject: c.Subject.CommonName, Scopes: []auth.Scope{auth.Read}}
		},
	})
	// HTCondor's client checks the server's certificate names the host
	// it dialed.
	addr := "localhost:" + ipAddr[strings.LastIndexByte(ipAddr, ':')+1:]
	aliceCert, aliceKey, _, err := a.WriteCertificate(t.TempDir(), "alice", nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	evilCert, evilKey, evilCA, err := other.WriteCertificate(t.TempDir(), "alice", nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	env := func(ca, cert, key string) []string {
		e := []string{"_CONDOR_AUTH_SSL_CLIENT_CAFILE=" + ca}
		if cert != "" {
			e = append(e, "_CONDOR_AUTH_SSL_CLIENT_CERTFILE="+cert, "_CONDOR_AUTH_SSL_CLIENT_KEYFILE="+key)
		}
		return e
	}
	want := "slot1@n1,slot2@n1"
	if r := queryEnv(t, addr, "SSL", env(caFile, aliceCert, aliceKey)); r.Error != "" || strings.Join(r.Names, ",") != want {
		t.Fatalf("a certificate of the CA: %+v\n%s", r, log.Take())
	}
	if len(granted) != 1 || granted[0] != "alice" {
		t.Errorf("granted %v, want alice", granted)
	}
	log.Take()
	for name, e := range map[string][]string{
		"no certificate":              env(caFile, "", ""),
		"a certificate of another CA": env(caFile, evilCert, evilKey),
		"a server of another CA":      env(evilCA, aliceCert, aliceKey),
	} {
		r := queryEnv(t, addr, "SSL", e)
		if r.Error == "" || len(r.Names) > 0 {
			t.Errorf("%s: answered %+v", name, r)
		}
		t.Logf("%s: %s | server: %s", name, r.Error, strings.TrimSpace(log.Take()))
	}
	if r := queryEnv(t, addr, "SSL", env(caFile, aliceCert, aliceKey)); r.Error != "" {
		t.Errorf("after the refusals: %+v", r)
	}
}
