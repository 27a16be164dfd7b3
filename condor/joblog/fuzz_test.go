package joblog

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func FuzzRead(f *testing.F) {
	var all bytes.Buffer
	for _, ev := range sampleEvents() {
		b, err := Format(ev, time.UTC)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		all.Write(b)
	}
	f.Add(all.Bytes())
	f.Add([]byte("000 (001.000.000) 11/22 12:00:00 Job submitted from host: <x>\n...\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		events, err := ReadAll(bytes.NewReader(data), time.UTC)
		if err != nil {
			return
		}
		// Whatever parses must survive a write/read round trip of its type and id.
		for _, ev := range events {
			b, err := Format(ev, time.UTC)
			if err != nil {
				continue
			}
			back, err := ReadAll(bytes.NewReader(b), time.UTC)
			if err != nil {
				if strings.Contains(err.Error(), "bad event time") {
					continue // years outside 0000-9999 cannot be written back
				}
				t.Fatalf("re-reading %q: %v", b, err)
			}
			if len(back) != 1 || back[0].Type != ev.Type || back[0].ID() != ev.ID() {
				t.Fatalf("round trip changed %v %s into %v", ev.Type, ev.ID(), back)
			}
		}
	})
}
