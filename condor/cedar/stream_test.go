package cedar

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/pond-htc/pond/condor/classad"
)

// tcpPair returns the two ends of a loopback TCP connection as streams.
func tcpPair(t testing.TB) (*Stream, *Stream) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	acc := make(chan net.Conn, 1)
	go func() {
		c, _ := l.Accept()
		acc <- c
	}()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	srv := <-acc
	t.Cleanup(func() { c.Close(); srv.Close() })
	return NewStream(c, nil, Limits{}), NewStream(srv, nil, Limits{})
}

// reading returns a stream that reads raw bytes (and cannot write).
func reading(raw []byte, l Limits) *Stream {
	a, b := net.Pipe()
	b.Close()
	return NewStream(a, bytes.NewReader(raw), l)
}

// async runs f in a goroutine and returns a function that waits for it.
func async(f func()) func() {
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	return func() { <-done }
}

func packet(end byte, payload []byte) []byte {
	h := make([]byte, HeaderSize, HeaderSize+len(payload))
	h[0] = end
	binary.BigEndian.PutUint32(h[1:], uint32(len(payload)))
	return append(h, payload...)
}

func TestRoundTripValues(t *testing.T) {
	for _, crypt := range []bool{false, true} {
		c, s := tcpPair(t)
		if crypt {
			key := bytes.Repeat([]byte{7}, KeySize)
			if err := c.SetKey(key); err != nil {
				t.Fatal(err)
			}
			if err := s.SetKey(key); err != nil {
				t.Fatal(err)
			}
			c.SetCryptoMode(true)
			s.SetCryptoMode(true)
		}
		ad, err := classad.ParseOldAd("Name = \"slot1@a\"\nCpus = 4\nRequirements = TARGET.Memory > 10 && Owner == \"x\\\"y\"\nMyType = \"Machine\"\n")
		if err != nil {
			t.Fatal(err)
		}
		big := strings.Repeat("x", 3*sendPacket) // spans several packets
		go func() {
			_ = c.PutInt(-5)
			_ = c.PutString("hello")
			_ = c.PutString(big)
			_ = c.PutAd(ad, nil)
			_ = c.PutAd(ad, []string{"cpus"})
			_ = c.EndMessage()
		}()
		if v, err := s.GetInt(); err != nil || v != -5 {
			t.Fatalf("crypt=%v GetInt = %d, %v", crypt, v, err)
		}
		if v, err := s.GetString(); err != nil || v != "hello" {
			t.Fatalf("GetString = %q, %v", v, err)
		}
		if v, err := s.GetString(); err != nil || v != big {
			t.Fatalf("big GetString = %d bytes, %v", len(v), err)
		}
		got, err := s.GetAd()
		if err != nil {
			t.Fatal(err)
		}
		if got.String() != ad.String() {
			t.Fatalf("ad:\n%s\nwant\n%s", got, ad)
		}
		proj, err := s.GetAd()
		if err != nil {
			t.Fatal(err)
		}
		if proj.String() != "Cpus = 4\nMyType = \"Machine\"\n" {
			t.Fatalf("projected ad:\n%s", proj)
		}
		if err := s.EndRead(); err != nil {
			t.Fatalf("EndRead: %v", err)
		}
	}
}

func TestMalformedInput(t *testing.T) {
	huge := []byte{1, 0x80, 0, 0, 0} // a 2 GiB length prefix
	tests := []struct {
		name string
		raw  []byte
		want error
		msg  string
	}{
		{"huge length prefix", huge, ErrFrame, "over the limit"},
		{"header cut short", []byte{1, 0, 0}, ErrFrame, "header"},
		{"payload cut short", append([]byte{1, 0, 0, 0, 10}, 1, 2, 3), ErrFrame, "3 of 10"},
		{"bad end flag", packet(7, make([]byte, 8)), ErrFrame, "end flag 7"},
		{"integer past the end", packet(1, []byte{0, 0, 0}), ErrEndOfMessage, ""},
		{"string without NUL", packet(1, []byte("abc")), ErrDecode, "NUL"},
		{"ad count forged", packet(1, []byte{0, 0, 0, 0, 0x7f, 0, 0, 0}), ErrDecode, "attributes"},
		{"ad expression bad", packet(1, append([]byte{0, 0, 0, 0, 0, 0, 0, 1}, "A = = 3\x00\x00\x00"...)), ErrDecode, "attribute 1 of 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := reading(tt.raw, Limits{})
			_, err := s.GetAd()
			if strings.HasPrefix(tt.name, "string") {
				_, err = s.GetString()
			}
			if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("err = %v, want %v saying %q", err, tt.want, tt.msg)
			}
		})
	}
}

func TestMessageLimit(t *testing.T) {
	var raw []byte
	for i := 0; i < 5; i++ {
		raw = append(raw, packet(0, make([]byte, 1000))...)
	}
	raw = append(raw, packet(1, make([]byte, 1000))...)
	s := reading(raw, Limits{MaxMessage: 4096})
	if _, err := s.GetBytes(5000); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("err = %v, want ErrTooLarge", err)
	}
	s = reading(raw, Limits{MaxMessage: 4096})
	if _, err := s.GetInt(); err != nil {
		t.Fatal(err)
	}
	if err := s.EndRead(); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("EndRead over the limit = %v, want ErrTooLarge", err)
	}
}

func TestMessageBoundaries(t *testing.T) {
	raw := append(packet(0, []byte{0, 0, 0, 0}), packet(1, []byte{0, 0, 0, 9, 'a', 0})...)
	raw = append(raw, packet(1, []byte{0, 0, 0, 0, 0, 0, 0, 2})...)
	s := reading(raw, Limits{})
	if v, err := s.GetInt(); err != nil || v != 9 {
		t.Fatalf("GetInt across packets = %d, %v", v, err)
	}
	if err := s.EndRead(); !errors.Is(err, ErrTrailing) {
		t.Fatalf("EndRead with a string left = %v, want ErrTrailing", err)
	}
	if v, err := s.GetInt(); err != nil || v != 2 {
		t.Fatalf("next message GetInt = %d, %v", v, err)
	}
	if _, err := s.GetInt(); !errors.Is(err, ErrEndOfMessage) {
		t.Fatalf("read past the message = %v, want ErrEndOfMessage", err)
	}
}

func TestSealedTamper(t *testing.T) {
	c, s := tcpPair(t)
	key := bytes.Repeat([]byte{1}, KeySize)
	// Both sides see the same clear prefix, then seal.
	wait := async(func() { _ = c.PutInt(1); _ = c.EndMessage() })
	if _, err := s.GetInt(); err != nil {
		t.Fatal(err)
	}
	_ = s.EndRead()
	wait()
	_ = c.SetKey(key)
	_ = s.SetKey(key)
	go func() { _ = c.PutInt(42); _ = c.EndMessage() }()
	if v, err := s.GetInt(); err != nil || v != 42 {
		t.Fatalf("sealed GetInt = %d, %v", v, err)
	}
	_ = s.EndRead()

	// A stream whose clear prefix differs fails the first sealed packet.
	c2, s2 := tcpPair(t)
	wait = async(func() { _ = c2.PutInt(1); _ = c2.EndMessage() })
	_, _ = s2.GetInt()
	_ = s2.EndRead()
	wait()
	c2.sent.Write([]byte("tampered"))
	_ = c2.SetKey(key)
	_ = s2.SetKey(key)
	go func() { _ = c2.PutInt(42); _ = c2.EndMessage() }()
	if _, err := s2.GetInt(); !errors.Is(err, ErrIntegrity) {
		t.Fatalf("tampered handshake = %v, want ErrIntegrity", err)
	}
}
