package cedar

import (
	"strings"
	"testing"

	"github.com/pond-htc/pond/condor/classad"
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

// FuzzPutAttrs sends an ad given as attribute texts with PutAttrs and
// checks that it reads back as the same ad PutAd sends of the parsed ad.
func FuzzPutAttrs(f *testing.F) {
	f.Add("A", "1", "B", `"x y"`, "Machine")
	f.Add("Req", `TARGET.Memory >= 1024 && Owner is "bob"`, "S", `"a\\b\"c"`, "Job")
	f.Add("R", "2.5", "L", `{ 1, "a" }`, "")
	f.Add("N", "-0", "Z", "007", "x")
	f.Add("T", "true", "U", "undefined", "")
	f.Add("E", `"é"`, "M", "-9223372036854775808", "")
	f.Fuzz(func(t *testing.T, n1, e1, n2, e2, myType string) {
		attrs := map[string]string{n1: e1, n2: e2, "MyType": classad.QuoteString(myType)}
		want := classad.NewAd()
		for n, e := range attrs {
			if err := want.SetExpr(n, e); err != nil {
				return
			}
		}
		for _, n := range []string{n1, n2} {
			if _, _, err := classad.ParseOldAttr(n + " = 1"); err != nil || isTypeAttr(n) || strings.EqualFold(n1, n2) {
				return
			}
		}
		c, srv := tcpPair(t)
		done := async(func() {
			if err := c.PutAttrs(attrs, nil); err != nil {
				t.Errorf("PutAttrs: %v", err)
			}
			_ = c.EndMessage()
		})
		got, err := srv.GetAd()
		done()
		if err != nil {
			t.Fatalf("reading %v: %v", attrs, err)
		}
		c2, srv2 := tcpPair(t)
		done = async(func() { _ = c2.PutAd(want, nil); _ = c2.EndMessage() })
		back, err := srv2.GetAd()
		done()
		if err != nil {
			t.Fatalf("reading PutAd of %v: %v", attrs, err)
		}
		if canon(got) != canon(back) {
			t.Fatalf("PutAttrs of %v reads as\n%s\nPutAd as\n%s", attrs, canon(got), canon(back))
		}
	})
}

// canon prints an ad with its attributes in name order.
func canon(ad *classad.Ad) string {
	var b strings.Builder
	for _, n := range ad.SortedNames() {
		e, _ := ad.Lookup(n)
		b.WriteString(n + " = " + e.String() + "\n")
	}
	return b.String()
}
