package api

import (
	"encoding/base64"
	"strings"
	"testing"
)

func TestGossipKey(t *testing.T) {
	k, err := GossipKeyGen()
	if err != nil {
		t.Fatal(err)
	}
	if b, err := ParseGossipKey(k); err != nil || len(b) != 32 {
		t.Fatalf("ParseGossipKey(GossipKeyGen()) = %d bytes, %v", len(b), err)
	}
	for _, tc := range []struct {
		in   string
		want string
	}{
		{base64.StdEncoding.EncodeToString(make([]byte, 16)), ""},
		{base64.StdEncoding.EncodeToString(make([]byte, 24)), ""},
		{base64.StdEncoding.EncodeToString(make([]byte, 20)), "20 bytes"},
		{"%%%", "not valid base64"},
		{"", "0 bytes"},
	} {
		_, err := ParseGossipKey(tc.in)
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("ParseGossipKey(%q) = %v, want %q", tc.in, err, tc.want)
		}
	}
}
