package cedar

import (
	"testing"
)

// FuzzFrames feeds arbitrary bytes to the packet reader and the typed
// gets: nothing may panic, and nothing may allocate past the limits.
func FuzzFrames(f *testing.F) {
	f.Add(packet(1, []byte{0, 0, 0, 0, 0, 0, 0, 5}))
	f.Add([]byte{1, 0x80, 0, 0, 0})
	f.Add(append(packet(0, []byte("ab")), packet(1, []byte("c\x00"))...))
	f.Fuzz(func(t *testing.T, raw []byte) {
		s := reading(raw, Limits{MaxPacket: 1 << 12, MaxMessage: 1 << 14})
		for i := 0; i < 8; i++ {
			if _, err := s.GetString(); err != nil {
				break
			}
			if _, err := s.GetInt(); err != nil {
				break
			}
		}
		_ = s.EndRead()
	})
}

// FuzzAd feeds arbitrary message payloads to the ClassAd wire parser.
func FuzzAd(f *testing.F) {
	f.Add([]byte("\x00\x00\x00\x00\x00\x00\x00\x02A = 1\x00B = \"x\"\x00Machine\x00\x00"))
	f.Add([]byte("\x00\x00\x00\x00\x00\x00\x00\x01ZKM\x00A = [ b = 1 ]\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, payload []byte) {
		s := reading(packet(1, payload), Limits{})
		ad, err := s.GetAd()
		if err != nil {
			return
		}
		// What parsed prints and parses back the same.
		c, srv := tcpPair(t)
		go func() { _ = c.PutAd(ad, nil); _ = c.EndMessage() }()
		back, err := srv.GetAd()
		if err != nil {
			t.Fatalf("re-reading %q: %v", ad.String(), err)
		}
		if back.String() != ad.String() {
			t.Fatalf("round trip:\n%s\nwant\n%s", back, ad)
		}
	})
}
