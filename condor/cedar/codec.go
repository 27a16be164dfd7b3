package cedar

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"strings"
)

// intSize is the size of every integer on the wire: HTCondor widens int,
// long and their unsigned kinds to 8 big-endian bytes.
const intSize = 8

// PutInt appends an integer to the message being written.
func (s *Stream) PutInt(v int64) error {
	var b [intSize]byte
	binary.BigEndian.PutUint64(b[:], uint64(v))
	return s.put(b[:])
}

// GetInt reads an integer.
func (s *Stream) GetInt() (int64, error) {
	b, err := s.take(intSize)
	if err != nil {
		return 0, fmt.Errorf("reading an integer: %w", err)
	}
	return int64(binary.BigEndian.Uint64(b)), nil
}

// GetInt32 reads an integer that must fit 32 bits (a command, a count).
func (s *Stream) GetInt32() (int32, error) {
	v, err := s.GetInt()
	if err != nil {
		return 0, err
	}
	if v < math.MinInt32 || v > math.MaxInt32 {
		return 0, fmt.Errorf("%w: integer %d does not fit 32 bits", ErrDecode, v)
	}
	return int32(v), nil
}

// PutChar appends one byte.
func (s *Stream) PutChar(c byte) error { return s.put([]byte{c}) }

// GetChar reads one byte.
func (s *Stream) GetChar() (byte, error) {
	b, err := s.take(1)
	if err != nil {
		return 0, fmt.Errorf("reading a byte: %w", err)
	}
	return b[0], nil
}

// PutBytes appends raw bytes.
func (s *Stream) PutBytes(b []byte) error { return s.put(b) }

// GetBytes reads n raw bytes.
func (s *Stream) GetBytes(n int) ([]byte, error) {
	b, err := s.take(n)
	if err != nil {
		return nil, fmt.Errorf("reading %d bytes: %w", n, err)
	}
	return append([]byte(nil), b...), nil
}

// PutString appends a string: NUL-terminated, and preceded by its length
// (counting the NUL) while encryption is on. A string holding a NUL is
// refused: the peer would read it cut short.
func (s *Stream) PutString(v string) error {
	if strings.IndexByte(v, 0) >= 0 {
		return fmt.Errorf("%w: string holds a NUL byte", ErrDecode)
	}
	if s.encrypt {
		if err := s.PutInt(int64(len(v) + 1)); err != nil {
			return err
		}
	}
	s.out = append(s.out, v...)
	return s.put([]byte{0})
}

// GetString reads a string.
func (s *Stream) GetString() (string, error) {
	if s.encrypt {
		n, err := s.GetInt()
		if err != nil {
			return "", err
		}
		if n < 1 || n > int64(s.limits.MaxMessage) {
			return "", fmt.Errorf("%w: string length %d", ErrDecode, n)
		}
		b, err := s.take(int(n))
		if err != nil {
			return "", fmt.Errorf("reading a string of %d bytes: %w", n, err)
		}
		if b[n-1] != 0 || bytes.IndexByte(b[:n-1], 0) >= 0 {
			return "", fmt.Errorf("%w: string of %d bytes is not NUL-terminated once", ErrDecode, n)
		}
		return string(b[:n-1]), nil
	}
	if err := s.StartMessage(); err != nil {
		return "", err
	}
	for {
		if i := bytes.IndexByte(s.in[s.inPos:], 0); i >= 0 {
			v := string(s.in[s.inPos : s.inPos+i])
			s.inPos += i + 1
			return v, nil
		}
		if s.inDone {
			return "", fmt.Errorf("%w: string without its NUL at the end of the message", ErrDecode)
		}
		if err := s.need(len(s.in) - s.inPos + 1); err != nil {
			return "", fmt.Errorf("reading a string: %w", err)
		}
	}
}

// SetCryptoMode turns HTCondor's encryption mode on or off: while it is on,
// strings carry a length prefix. The packets themselves are sealed once a
// key is set (SetKey), whatever the mode.
func (s *Stream) SetCryptoMode(on bool) { s.encrypt = on }

// CryptoMode reports the encryption mode.
func (s *Stream) CryptoMode() bool { return s.encrypt }

// GetRest reads what is left of the current message as raw bytes (as
// HTCondor's code_bytes sends a stream of unknown length up to the end
// of the message), refusing more than max bytes with ErrTooLarge. The
// message stays open: EndRead closes it.
func (s *Stream) GetRest(max int) ([]byte, error) {
	if err := s.StartMessage(); err != nil {
		return nil, err
	}
	limit := min(max, s.limits.MaxMessage)
	for !s.inDone {
		if len(s.in)-s.inPos > limit {
			break
		}
		p, end, err := s.readPacket()
		if err != nil {
			return nil, fmt.Errorf("reading the rest of the message: %w", err)
		}
		s.in = append(s.in[s.inPos:], p...)
		s.inPos = 0
		s.inDone = end
	}
	if n := len(s.in) - s.inPos; n > limit {
		return nil, fmt.Errorf("%w: more than %d bytes to the end of the message", ErrTooLarge, limit)
	}
	b := append([]byte(nil), s.in[s.inPos:]...)
	s.inPos = len(s.in)
	return b, nil
}
