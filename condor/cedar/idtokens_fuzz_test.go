package cedar

import (
	"bytes"
	"encoding/binary"
	"testing"
)

func fuzzInt(v int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(v)) }

// FuzzIDTokensMessages feeds arbitrary payloads to the readers of the
// client's two IDTOKENS messages: nothing may panic, and what they accept
// keeps within the exchange's limits.
func FuzzIDTokensMessages(f *testing.F) {
	hello := append(append(append(append(fuzzInt(0), fuzzInt(3)...), "a@b\x00h.p\x00"...), fuzzInt(pwNonceLen)...), bytes.Repeat([]byte{7}, pwNonceLen)...)
	proof := append(append(append(append(append(fuzzInt(0), fuzzInt(3)...), "a@b\x00"...), fuzzInt(2)...), "rb"...), fuzzInt(1)...)
	f.Add(hello)
	f.Add(append(proof, 'm'))
	f.Add(append(fuzzInt(-1), fuzzInt(1<<62)...))
	f.Fuzz(func(t *testing.T, payload []byte) {
		if h, err := readHello(reading(packet(1, payload), Limits{})); err == nil {
			if len(h.name) > pwMaxNameLen || len(h.ra) > pwNonceLen {
				t.Fatalf("hello over the limits: %d-byte name, %d-byte nonce", len(h.name), len(h.ra))
			}
		}
		if p, err := readProof(reading(packet(1, payload), Limits{})); err == nil {
			if len(p.name) > pwMaxNameLen || len(p.rb) > pwNonceLen || len(p.mac) > pwMaxMAC {
				t.Fatalf("proof over the limits: %d, %d, %d", len(p.name), len(p.rb), len(p.mac))
			}
		}
	})
}
