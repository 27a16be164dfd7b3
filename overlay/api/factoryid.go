package api

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
)

// GlideinIDPrefix starts the ID of every glidein pond submits; a site
// lists only the glideins that carry it, and what does not carry it is
// never touched.
const GlideinIDPrefix = "pond-"

// ParseFactoryEntry reads a pilot factory's entry from JSON (unknown
// fields refused) and validates it.
func ParseFactoryEntry(data []byte) (FactoryEntrySpec, error) {
	var e FactoryEntrySpec
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		return FactoryEntrySpec{}, fmt.Errorf("entry: %w", err)
	}
	if err := e.Validate(); err != nil {
		return FactoryEntrySpec{}, err
	}
	return e, nil
}

// maxFactoryPoolTag is the most characters of a pool's name in its glideins' IDs.
const maxFactoryPoolTag = 20

// FactoryPrefix is what the ID of every glidein of pool's factory starts with,
// and so the names its delegated key and CA are limited to:
// GlideinIDPrefix, the pool's tag, then '-'. The tag is the pool's name
// in lower case with letters and digits only, followed by six hex digits
// of its hash when that changed the name (so that pools a_b, A_b and ab
// differ); it never holds a '-', so no pool's prefix is the beginning
// of another's (pond-campus- is not that of pool campus-west, whose tag
// is campuswest plus its hash).
func FactoryPrefix(pool string) string {
	lower := strings.ToLower(pool)
	var b strings.Builder
	for _, r := range lower {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		}
	}
	tag := b.String()
	if len(tag) > maxFactoryPoolTag {
		tag = tag[:maxFactoryPoolTag]
	}
	if tag != pool {
		sum := sha256.Sum256([]byte(pool))
		tag += hex.EncodeToString(sum[:3])
	}
	return GlideinIDPrefix + tag + "-"
}
