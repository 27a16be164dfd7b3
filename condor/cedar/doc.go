// Package cedar speaks CEDAR, the protocol HTCondor's daemons and tools use
// among themselves, so that HTCondor's own clients (condor_status, the
// htcondor Python bindings) can talk to pond's daemons.
//
// A CEDAR connection is a TCP stream of packets. Each packet has a 5-byte
// header, an end flag (1 for the last packet of a message, 0 otherwise) and
// a big-endian 32-bit payload length, followed by the payload. A message is
// the concatenation of the payloads of its packets. Inside a message, values
// are coded one after another: integers as 8 big-endian bytes, strings
// NUL-terminated (preceded by their length once encryption is on), and
// ClassAds as a count of "Name = Expr" strings followed by MyType and
// TargetType.
//
// Stream reads and writes messages with typed get and put calls and hard
// limits on the size of a packet and of a message, so that a peer's length
// prefix never makes the server allocate more than the limits allow. Once a
// session key is set, every packet is sealed with AES-256-GCM the way
// HTCondor 9 and later frame it.
//
// Server runs the server side of HTCondor's DC_AUTHENTICATE handshake on a
// Stream: security-policy negotiation, an authentication Method (IDTOKENS,
// SSL, FS, and any other that implements the interface), the ECDH key
// exchange, the post-authentication ad, and resumption of a cached session
// by its id. It hands the authenticated command to a Handler.
package cedar
