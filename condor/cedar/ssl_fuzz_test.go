package cedar

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"testing"
)

// FuzzSSLMessage feeds arbitrary payloads to the reader of the client's
// SSL messages (status, length, TLS bytes): nothing may panic, and what it
// accepts keeps within the exchange's limit.
func FuzzSSLMessage(f *testing.F) {
	f.Add(append(append(fuzzInt(sslReceiving), fuzzInt(3)...), "abc"...))
	f.Add(append(fuzzInt(sslHolding), fuzzInt(0)...))
	f.Add(append(fuzzInt(sslHolding), fuzzInt(sslMaxMessage+1)...))
	f.Add(append(append(fuzzInt(0), fuzzInt(-1)...), bytes.Repeat([]byte{1}, 16)...))
	f.Fuzz(func(t *testing.T, payload []byte) {
		_, data, err := getMessage(reading(packet(1, payload), Limits{}))
		if err == nil && len(data) > sslMaxMessage {
			t.Fatalf("a message of %d TLS bytes accepted", len(data))
		}
	})
}

// TestTLSEngineBadInput checks that the engine refuses bytes that are no
// TLS handshake, and that closing an engine waiting for the client's
// bytes ends its handshake.
func TestTLSEngineBadInput(t *testing.T) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS13, ClientAuth: tls.RequireAnyClientCert,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return nil, errors.New("no certificate") }}
	eng := newTLSEngine(context.Background(), cfg)
	if done, err := eng.step(); done || err != nil {
		t.Fatalf("before any input: done %v, %v", done, err)
	}
	if err := eng.feed(bytes.Repeat([]byte("GET / HTTP/1.1\r\n"), 4)); err != nil {
		t.Fatal(err)
	}
	if done, err := eng.step(); !done || err == nil {
		t.Fatalf("after bytes that are no TLS: done %v, %v", done, err)
	}
	if err := eng.feed(make([]byte, sslMaxMessage+1)); err == nil {
		t.Error("more than a message's worth of bytes buffered")
	}

	waiting := newTLSEngine(context.Background(), cfg)
	if done, _ := waiting.step(); done {
		t.Fatal("done before any input")
	}
	waiting.close()
	if done, err := waiting.step(); !done || err == nil {
		t.Fatalf("after close: done %v, %v", done, err)
	}
}
