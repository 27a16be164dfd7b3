package api

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net"
	"strings"
)

// GossipProfiles lists the gossip timing profile names a sea member
// accepts (overlay/gossip.Start).
var GossipProfiles = []string{"lan", "wan", "local", "fast"}

// GossipKeyGen returns a new random 32-byte gossip encryption key,
// base64-encoded, as "pondctl sea keygen" prints it.
func GossipKeyGen() (string, error) {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return "", fmt.Errorf("sea: reading random bytes: %w", err)
	}
	return base64.StdEncoding.EncodeToString(key), nil
}

// ParseGossipKey decodes a base64 gossip key and checks its length (16,
// 24 or 32 bytes, for AES-128, -192 or -256).
func ParseGossipKey(s string) ([]byte, error) {
	key, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("encryption key is not valid base64: %w", err)
	}
	switch len(key) {
	case 16, 24, 32:
		return key, nil
	}
	return nil, fmt.Errorf("encryption key is %d bytes; want 16, 24 or 32", len(key))
}

// IsLoopback reports whether host is a loopback address (or "localhost"),
// where a sea member allows unencrypted gossip.
func IsLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
