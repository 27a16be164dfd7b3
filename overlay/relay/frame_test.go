package relay

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/netip"
	"testing"
)

func TestPacketFrames(t *testing.T) {
	addrs := []netip.AddrPort{
		netip.MustParseAddrPort("127.0.0.1:7946"),
		netip.MustParseAddrPort("[2001:db8::1]:1"),
		netip.MustParseAddrPort("10.0.0.2:65535"),
	}
	payloads := [][]byte{{}, []byte("ping"), bytes.Repeat([]byte{0xab}, MaxPacket)}
	var buf []byte
	for i, a := range addrs {
		var err error
		if buf, err = AppendPacket(buf, a, payloads[i]); err != nil {
			t.Fatal(err)
		}
	}
	r := bufio.NewReader(bytes.NewReader(buf))
	for i, want := range addrs {
		a, p, err := ReadPacket(r)
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if a != want || !bytes.Equal(p, payloads[i]) {
			t.Errorf("frame %d: %v, %d bytes; want %v, %d bytes", i, a, len(p), want, len(payloads[i]))
		}
	}
	if _, _, err := ReadPacket(r); err != io.EOF {
		t.Errorf("after the last frame: %v, want io.EOF", err)
	}
	if _, err := AppendPacket(nil, addrs[0], make([]byte, MaxPacket+1)); !errors.Is(err, ErrFrame) {
		t.Errorf("oversized packet: %v, want ErrFrame", err)
	}
}

func TestBadFrames(t *testing.T) {
	good, _ := AppendPacket(nil, netip.MustParseAddrPort("127.0.0.1:1"), []byte("abc"))
	for _, tc := range []struct {
		name string
		in   []byte
		want error
	}{
		{"address not IP:PORT", append([]byte{4}, "host"...), ErrFrame},
		{"host name", append([]byte{11}, "localhost:1"...), ErrFrame},
		{"cut in the address", good[:5], io.ErrUnexpectedEOF},
		{"cut in the length", good[:len(good)-4], io.ErrUnexpectedEOF},
		{"cut in the payload", good[:len(good)-1], io.ErrUnexpectedEOF},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := ReadPacket(bufio.NewReader(bytes.NewReader(tc.in)))
			if !errors.Is(err, tc.want) {
				t.Errorf("ReadPacket: %v, want %v", err, tc.want)
			}
		})
	}
	for _, tc := range []struct {
		name string
		in   []byte
	}{
		{"unknown kind", []byte{'X', 0}},
		{"kind without address", []byte{KindAPI}},
		{"bad address", append([]byte{KindDial, 3}, "a:b"...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, _, err := ReadHeader(bytes.NewReader(tc.in)); err == nil {
				t.Errorf("ReadHeader(%q) accepted it", tc.in)
			}
		})
	}
}

func FuzzReadPacket(f *testing.F) {
	good, _ := AppendPacket(nil, netip.MustParseAddrPort("127.0.0.1:7946"), []byte("payload"))
	f.Add(good)
	f.Add([]byte{0})
	f.Add([]byte{255})
	f.Add(append([]byte{KindAPI}, good...))
	f.Fuzz(func(t *testing.T, in []byte) {
		r := bufio.NewReader(bytes.NewReader(in))
		for {
			a, p, err := ReadPacket(r)
			if err != nil {
				if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, ErrFrame) {
					t.Fatalf("unexpected error kind: %v", err)
				}
				break
			}
			// What is read writes back the same.
			again, err := AppendPacket(nil, a, p)
			if err != nil {
				t.Fatalf("re-encoding %v: %v", a, err)
			}
			a2, p2, err := ReadPacket(bufio.NewReader(bytes.NewReader(again)))
			if err != nil || a2 != a || !bytes.Equal(p2, p) {
				t.Fatalf("round trip of %v: %v, %v, %v", a, a2, p2, err)
			}
		}
		ReadHeader(bytes.NewReader(in))
	})
}
