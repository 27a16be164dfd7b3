package cedar

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"
	"net"
	"time"
)

// HeaderSize is the size of a packet header: the end flag and the length.
const HeaderSize = 5

// Default limits of a Stream.
const (
	// DefaultMaxPacket bounds one packet's payload. HTCondor's own
	// packets stay far below it.
	DefaultMaxPacket = 1 << 20
	// DefaultMaxMessage bounds a message read as a whole (a request: a
	// query, an ad update, a handshake step).
	DefaultMaxMessage = 16 << 20
	// sendPacket is the payload size at which a message being written is
	// sent as a packet with more to follow.
	sendPacket = 64 << 10
)

// Errors a Stream returns; match them with errors.Is.
var (
	// ErrFrame marks a malformed packet: a bad end flag, a length over
	// the limit, a packet cut short.
	ErrFrame = errors.New("cedar: malformed packet")
	// ErrTooLarge marks a message over the Stream's message limit.
	ErrTooLarge = errors.New("cedar: message too large")
	// ErrEndOfMessage marks a read past the end of the current message.
	ErrEndOfMessage = errors.New("cedar: read past the end of the message")
	// ErrDecode marks a value that does not decode: a string without its
	// NUL, a ClassAd expression that does not parse.
	ErrDecode = errors.New("cedar: cannot decode value")
	// ErrIntegrity marks a sealed packet that fails authentication.
	ErrIntegrity = errors.New("cedar: packet fails its integrity check")
)

// Limits bound what a Stream reads. Zero fields take the defaults.
type Limits struct {
	MaxPacket  int // one packet's payload (DefaultMaxPacket)
	MaxMessage int // one message read as a whole (DefaultMaxMessage)
}

func (l Limits) withDefaults() Limits {
	if l.MaxPacket <= 0 {
		l.MaxPacket = DefaultMaxPacket
	}
	if l.MaxMessage <= 0 {
		l.MaxMessage = DefaultMaxMessage
	}
	return l
}

// Stream is one CEDAR connection: messages in both directions, read and
// written with typed get and put calls. A Stream is not safe for concurrent
// use; the protocol alternates turns anyway.
type Stream struct {
	conn   net.Conn
	r      io.Reader
	w      *bufio.Writer
	limits Limits

	// The message being read: its payload so far, the read position, and
	// whether its last packet has arrived.
	in       []byte
	inPos    int
	inDone   bool
	inActive bool

	// The message being written, not yet sent.
	out []byte

	// Digests of every packet sent and received before the session key,
	// which the first sealed packet in each direction authenticates.
	sent, recv hash.Hash
	seal       *sealer
	// encrypt is HTCondor's crypto mode: strings carry a length prefix.
	encrypt bool
}

// NewStream returns a Stream on conn. r, when not nil, is read instead of
// conn (a listener that peeked at the first bytes passes its buffer).
func NewStream(conn net.Conn, r io.Reader, limits Limits) *Stream {
	if r == nil {
		r = conn
	}
	return &Stream{
		conn:   conn,
		r:      r,
		w:      bufio.NewWriterSize(conn, 8<<10),
		limits: limits.withDefaults(),
		sent:   sha256.New(),
		recv:   sha256.New(),
	}
}

// Conn returns the connection under the stream.
func (s *Stream) Conn() net.Conn { return s.conn }

// SetDeadline bounds the next reads and writes.
func (s *Stream) SetDeadline(t time.Time) error { return s.conn.SetDeadline(t) }

// Encrypted reports whether packets are sealed with a session key.
func (s *Stream) Encrypted() bool { return s.seal != nil }

// readPacket reads one packet and returns its payload (opened when the
// stream is sealed) and whether it ends its message.
func (s *Stream) readPacket() ([]byte, bool, error) {
	var hdr [HeaderSize]byte
	if _, err := io.ReadFull(s.r, hdr[:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, false, fmt.Errorf("%w: connection closed inside a packet header", ErrFrame)
		}
		return nil, false, err
	}
	end := hdr[0]
	if end > 1 {
		return nil, false, fmt.Errorf("%w: end flag %d is neither 0 nor 1", ErrFrame, end)
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	max := s.limits.MaxPacket
	if s.seal != nil {
		max += sealOverhead
	}
	if uint64(n) > uint64(max) {
		return nil, false, fmt.Errorf("%w: packet of %d bytes is over the limit of %d", ErrFrame, n, max)
	}
	payload := make([]byte, n)
	if got, err := io.ReadFull(s.r, payload); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return nil, false, fmt.Errorf("%w: packet cut short: %d of %d bytes", ErrFrame, got, n)
		}
		return nil, false, err
	}
	if s.seal != nil {
		clear, err := s.seal.open(payload, hdr[:])
		if err != nil {
			return nil, false, err
		}
		payload = clear
	} else {
		s.recv.Write(hdr[:])
		s.recv.Write(payload)
	}
	return payload, end == 1, nil
}

// StartMessage reads the first packet of the next message, so that a
// caller waiting for a peer's turn learns of a closed connection (io.EOF)
// here rather than in the middle of a value. Typed gets call it when no
// message is being read.
func (s *Stream) StartMessage() error {
	if s.inActive {
		return nil
	}
	p, end, err := s.readPacket()
	if err != nil {
		return err
	}
	s.in, s.inPos, s.inDone, s.inActive = p, 0, end, true
	return nil
}

// need makes n more bytes of the current message available.
func (s *Stream) need(n int) error {
	if err := s.StartMessage(); err != nil {
		return err
	}
	for len(s.in)-s.inPos < n {
		if s.inDone {
			return ErrEndOfMessage
		}
		p, end, err := s.readPacket()
		if err != nil {
			return err
		}
		if len(s.in)-s.inPos+len(p) > s.limits.MaxMessage {
			return fmt.Errorf("%w: more than %d bytes", ErrTooLarge, s.limits.MaxMessage)
		}
		// Drop what was consumed before growing.
		s.in = append(s.in[s.inPos:], p...)
		s.inPos = 0
		s.inDone = end
	}
	return nil
}

// take returns the next n bytes of the current message.
func (s *Stream) take(n int) ([]byte, error) {
	if n < 0 || n > s.limits.MaxMessage {
		return nil, fmt.Errorf("%w: %d bytes", ErrTooLarge, n)
	}
	if err := s.need(n); err != nil {
		return nil, err
	}
	b := s.in[s.inPos : s.inPos+n]
	s.inPos += n
	return b, nil
}

// EndRead finishes reading the current message. Bytes the caller left
// unread are an error (ErrTrailing), after the rest of the message has been
// read and dropped, so that the stream stays at a message boundary.
func (s *Stream) EndRead() error {
	if !s.inActive {
		if err := s.StartMessage(); err != nil {
			return err
		}
	}
	left := len(s.in) - s.inPos
	for !s.inDone {
		p, end, err := s.readPacket()
		if err != nil {
			return err
		}
		left += len(p)
		if left > s.limits.MaxMessage {
			return fmt.Errorf("%w: more than %d bytes", ErrTooLarge, s.limits.MaxMessage)
		}
		s.inDone = end
	}
	s.in, s.inPos, s.inDone, s.inActive = nil, 0, false, false
	if left > 0 {
		return fmt.Errorf("%w: %d bytes", ErrTrailing, left)
	}
	return nil
}

// ErrTrailing marks a message that had bytes left after its reader was
// done with it.
var ErrTrailing = errors.New("cedar: unread bytes at the end of the message")

// AtEnd reports whether the current message has no more bytes to read.
func (s *Stream) AtEnd() (bool, error) {
	if err := s.StartMessage(); err != nil {
		return false, err
	}
	for len(s.in) == s.inPos && !s.inDone {
		if err := s.need(1); err != nil {
			if errors.Is(err, ErrEndOfMessage) {
				return true, nil
			}
			return false, err
		}
	}
	return len(s.in) == s.inPos, nil
}

// writePacket sends one packet carrying payload.
func (s *Stream) writePacket(payload []byte, end bool) error {
	var hdr [HeaderSize]byte
	if end {
		hdr[0] = 1
	}
	if s.seal != nil {
		binary.BigEndian.PutUint32(hdr[1:], uint32(s.seal.sealedLen(len(payload))))
		sealed, err := s.seal.seal(payload, hdr[:])
		if err != nil {
			return err
		}
		payload = sealed
	} else {
		binary.BigEndian.PutUint32(hdr[1:], uint32(len(payload)))
		s.sent.Write(hdr[:])
		s.sent.Write(payload)
	}
	if _, err := s.w.Write(hdr[:]); err != nil {
		return err
	}
	_, err := s.w.Write(payload)
	return err
}

// put appends b to the message being written, sending full packets as it
// grows.
func (s *Stream) put(b []byte) error {
	s.out = append(s.out, b...)
	for len(s.out) > sendPacket {
		if err := s.writePacket(s.out[:sendPacket], false); err != nil {
			return err
		}
		s.out = append(s.out[:0], s.out[sendPacket:]...)
	}
	return nil
}

// EndMessage sends the rest of the message being written as its last
// packet and flushes the connection.
func (s *Stream) EndMessage() error {
	if err := s.writePacket(s.out, true); err != nil {
		return err
	}
	s.out = s.out[:0]
	return s.w.Flush()
}
