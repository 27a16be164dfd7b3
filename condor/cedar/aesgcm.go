package cedar

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
)

// The AES-GCM packet framing HTCondor 9 and later use once a session key
// is set. Each packet's payload is sealed on its own with a 16-byte nonce:
// the sender's random base nonce, sent in the clear ahead of its first
// sealed packet, with its first four bytes (big-endian) advanced by the
// packet's sequence number. The additional data is the packet header; the
// first sealed packet in each direction also authenticates the SHA-256
// digests of everything the two sides sent and received in the clear
// before the key, so that a tampered handshake fails the first packet.
const (
	gcmNonce     = 16
	gcmTag       = 16
	sealOverhead = gcmNonce + gcmTag
	// KeySize is the size of a session key: AES-256.
	KeySize = 32
)

type sealer struct {
	aead               cipher.AEAD
	sentSum, recvSum   []byte
	sendBase, recvBase [gcmNonce]byte
	sendSeq, recvSeq   uint32
}

// SetKey seals every later packet in both directions with key (KeySize
// bytes), as HTCondor's AES-GCM crypto does after the handshake. It is an
// error to set a key twice on one stream.
func (s *Stream) SetKey(key []byte) error {
	if s.seal != nil {
		return errors.New("cedar: stream already has a session key")
	}
	if len(key) != KeySize {
		return fmt.Errorf("cedar: session key of %d bytes, want %d", len(key), KeySize)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return fmt.Errorf("cedar: session key: %w", err)
	}
	aead, err := cipher.NewGCMWithNonceSize(block, gcmNonce)
	if err != nil {
		return fmt.Errorf("cedar: session key: %w", err)
	}
	sl := &sealer{aead: aead, sentSum: s.sent.Sum(nil), recvSum: s.recv.Sum(nil)}
	if _, err := rand.Read(sl.sendBase[:]); err != nil {
		return fmt.Errorf("cedar: nonce: %w", err)
	}
	s.seal = sl
	return nil
}

func (sl *sealer) sealedLen(n int) int {
	if sl.sendSeq == 0 {
		return n + sealOverhead
	}
	return n + gcmTag
}

func nonceFor(base [gcmNonce]byte, seq uint32) []byte {
	n := base
	binary.BigEndian.PutUint32(n[:4], binary.BigEndian.Uint32(base[:4])+seq)
	return n[:]
}

func (sl *sealer) seal(payload, hdr []byte) ([]byte, error) {
	if sl.sendSeq == ^uint32(0) {
		return nil, errors.New("cedar: too many packets on one connection")
	}
	aad := hdr
	var out []byte
	if sl.sendSeq == 0 {
		aad = append(append(append([]byte(nil), sl.sentSum...), sl.recvSum...), hdr...)
		out = append(out, sl.sendBase[:]...)
	}
	out = sl.aead.Seal(out, nonceFor(sl.sendBase, sl.sendSeq), payload, aad)
	sl.sendSeq++
	return out, nil
}

func (sl *sealer) open(payload, hdr []byte) ([]byte, error) {
	if sl.recvSeq == ^uint32(0) {
		return nil, errors.New("cedar: too many packets on one connection")
	}
	aad := hdr
	if sl.recvSeq == 0 {
		if len(payload) < gcmNonce {
			return nil, fmt.Errorf("%w: first sealed packet of %d bytes has no nonce", ErrIntegrity, len(payload))
		}
		copy(sl.recvBase[:], payload[:gcmNonce])
		payload = payload[gcmNonce:]
		// The peer's sent digest is our received one, and the other way.
		aad = append(append(append([]byte(nil), sl.recvSum...), sl.sentSum...), hdr...)
	}
	if len(payload) < gcmTag {
		return nil, fmt.Errorf("%w: sealed packet of %d bytes is shorter than its tag", ErrIntegrity, len(payload))
	}
	clear, err := sl.aead.Open(nil, nonceFor(sl.recvBase, sl.recvSeq), payload, aad)
	if err != nil {
		return nil, fmt.Errorf("%w: packet %d", ErrIntegrity, sl.recvSeq)
	}
	sl.recvSeq++
	return clear, nil
}
