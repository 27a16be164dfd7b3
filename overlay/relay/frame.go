package relay

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/netip"
)

// Stream kinds: the first byte of every stream on a tunnel says what the
// stream carries.
const (
	// KindAPI is a connection that reached the worker's API address on
	// the relay (relay to worker), preceded by its source address.
	KindAPI byte = 'A'
	// KindTree is a connection that reached the worker's tree address.
	KindTree byte = 'T'
	// KindGossip is a gossip stream connection that reached the worker's
	// gossip address over TCP.
	KindGossip byte = 'G'
	// KindPackets is the stream of gossip packets, one per tunnel and
	// direction: from the relay, those that reached the worker's gossip
	// address over UDP, each with its source; from the worker, those to
	// send from that address, each with its destination.
	KindPackets byte = 'P'
	// KindDial asks the relay (worker to relay) to open a gossip stream
	// connection to an address and splice it with the stream; the relay
	// answers one status byte, DialOK or DialRefused.
	KindDial byte = 'D'
)

// Answers to a KindDial stream.
const (
	DialOK      byte = 0
	DialRefused byte = 1
)

// MaxPacket is the largest gossip packet a tunnel carries, UDP's limit.
const MaxPacket = 65535

// maxAddr bounds the length of an address in a frame or a stream header.
const maxAddr = 255

// ErrFrame is wrapped by every error about a malformed frame or header.
var ErrFrame = errors.New("relay: malformed frame")

// writeAddr writes addr as one length byte and its text.
func writeAddr(w io.Writer, addr netip.AddrPort) error {
	s := addr.String()
	if len(s) > maxAddr {
		return fmt.Errorf("%w: address %q is longer than %d bytes", ErrFrame, s, maxAddr)
	}
	_, err := w.Write(append([]byte{byte(len(s))}, s...))
	return err
}

// readAddr reads what writeAddr wrote: an IP:PORT address.
func readAddr(r io.Reader) (netip.AddrPort, error) {
	var n [1]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return netip.AddrPort{}, err
	}
	buf := make([]byte, n[0])
	if _, err := io.ReadFull(r, buf); err != nil {
		return netip.AddrPort{}, unexpected(err)
	}
	ap, err := netip.ParseAddrPort(string(buf))
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("%w: address %q: %v", ErrFrame, buf, err)
	}
	return ap, nil
}

// WriteHeader writes a stream's header: its kind and an address (the
// source of an inbound connection, the destination of a dial).
func WriteHeader(w io.Writer, kind byte, addr netip.AddrPort) error {
	if _, err := w.Write([]byte{kind}); err != nil {
		return err
	}
	return writeAddr(w, addr)
}

// ReadHeader reads what WriteHeader wrote. A KindPackets stream has no
// address: its frames carry one each.
func ReadHeader(r io.Reader) (kind byte, addr netip.AddrPort, err error) {
	var k [1]byte
	if _, err := io.ReadFull(r, k[:]); err != nil {
		return 0, netip.AddrPort{}, err
	}
	switch k[0] {
	case KindPackets:
		return k[0], netip.AddrPort{}, nil
	case KindAPI, KindTree, KindGossip, KindDial:
	default:
		return 0, netip.AddrPort{}, fmt.Errorf("%w: unknown stream kind %#x", ErrFrame, k[0])
	}
	addr, err = readAddr(r)
	if err != nil {
		return 0, netip.AddrPort{}, unexpected(err)
	}
	return k[0], addr, nil
}

// AppendPacket appends the frame of one packet to buf: its address (the
// source of a packet from the relay, the destination of one from the
// worker), then a two-byte big-endian length and the payload.
func AppendPacket(buf []byte, addr netip.AddrPort, payload []byte) ([]byte, error) {
	s := addr.String()
	if len(s) > maxAddr {
		return buf, fmt.Errorf("%w: address %q is longer than %d bytes", ErrFrame, s, maxAddr)
	}
	if len(payload) > MaxPacket {
		return buf, fmt.Errorf("%w: packet of %d bytes, more than %d", ErrFrame, len(payload), MaxPacket)
	}
	buf = append(buf, byte(len(s)))
	buf = append(buf, s...)
	buf = binary.BigEndian.AppendUint16(buf, uint16(len(payload)))
	return append(buf, payload...), nil
}

// ReadPacket reads one frame AppendPacket wrote. It returns io.EOF at a
// clean end between frames, and an error wrapping ErrFrame or
// io.ErrUnexpectedEOF for anything else.
func ReadPacket(r *bufio.Reader) (netip.AddrPort, []byte, error) {
	addr, err := readAddr(r)
	if err != nil {
		return netip.AddrPort{}, nil, err
	}
	var n [2]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return netip.AddrPort{}, nil, unexpected(err)
	}
	payload := make([]byte, binary.BigEndian.Uint16(n[:]))
	if _, err := io.ReadFull(r, payload); err != nil {
		return netip.AddrPort{}, nil, unexpected(err)
	}
	return addr, payload, nil
}

// unexpected turns an end of input inside a frame into io.ErrUnexpectedEOF.
func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
