package state

import (
	"strings"
	"testing"
)

func TestAddressString(t *testing.T) {
	tests := []struct {
		addr Address
		want string
	}{
		{Address{Mode: ModeManaged, Type: "pool", Name: "campus"}, "pool.campus"},
		{Address{Type: "pool", Name: "campus"}, "pool.campus"},
		{Address{Type: "pool", Name: "w", Key: 0}, "pool.w[0]"},
		{Address{Type: "pool", Name: "w", Key: 12}, "pool.w[12]"},
		{Address{Type: "pool", Name: "w", Key: float64(3)}, "pool.w[3]"},
		{Address{Type: "pool", Name: "w", Key: "a"}, `pool.w["a"]`},
		{Address{Mode: ModeData, Type: "sea_query", Name: "big"}, "data.sea_query.big"},
		{Address{Mode: ModeData, Type: "sea_query", Name: "big", Key: "x"}, `data.sea_query.big["x"]`},
		{Address{Type: "pool", Name: "w", Key: `a"b\c`}, `pool.w["a\"b\\c"]`},
		{Address{Type: "pool", Name: "w", Key: "line\nnext\ttab\r"}, `pool.w["line\nnext\ttab\r"]`},
		{Address{Type: "pool", Name: "w", Key: "${x} %{y} $ %"}, `pool.w["$${x} %%{y} $ %"]`},
		{Address{Type: "pool", Name: "w", Key: "\x01é日本"}, `pool.w["\u0001é日本"]`},
		{Address{Type: "pool", Name: "w", Key: ""}, `pool.w[""]`},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := tt.addr.String(); got != tt.want {
				t.Fatalf("String() = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestParseAddress(t *testing.T) {
	tests := []struct {
		in   string
		want Address
	}{
		{"pool.campus", Address{Mode: ModeManaged, Type: "pool", Name: "campus"}},
		{"pool.w[0]", Address{Mode: ModeManaged, Type: "pool", Name: "w", Key: 0}},
		{"pool.w[42]", Address{Mode: ModeManaged, Type: "pool", Name: "w", Key: 42}},
		{`pool.w["a"]`, Address{Mode: ModeManaged, Type: "pool", Name: "w", Key: "a"}},
		{`pool.w["a\"b"]`, Address{Mode: ModeManaged, Type: "pool", Name: "w", Key: `a"b`}},
		{`pool.w["$${x}"]`, Address{Mode: ModeManaged, Type: "pool", Name: "w", Key: "${x}"}},
		{"data.sea_query.big", Address{Mode: ModeData, Type: "sea_query", Name: "big"}},
		{"data.sea_query.big[1]", Address{Mode: ModeData, Type: "sea_query", Name: "big", Key: 1}},
		{"my-pool.a-b_c", Address{Mode: ModeManaged, Type: "my-pool", Name: "a-b_c"}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseAddress(tt.in)
			if err != nil {
				t.Fatalf("ParseAddress: %v", err)
			}
			if got != tt.want {
				t.Fatalf("ParseAddress = %#v, want %#v", got, tt.want)
			}
			if s := got.String(); s != tt.in {
				t.Fatalf("String() = %s, want %s", s, tt.in)
			}
		})
	}
}

func TestParseAddressErrors(t *testing.T) {
	tests := []struct {
		in   string
		want string
	}{
		{"", "invalid address \"\""},
		{"pool", `invalid address "pool": 1:1: a resource address is TYPE.NAME`},
		{"pool.", `invalid address "pool.": 1:6: Attribute name required`},
		{"data.sea_query", `1:5: a data resource address is data.TYPE.NAME`},
		{"data", `a data resource address is data.TYPE.NAME`},
		{"pool.w[-1]", "1:8: Index value required"},
		{"pool.w[1.5]", "instance key 1.5 is not a whole non-negative number"},
		{"pool.w[99999999999999]", "is too large"},
		{"pool.w[true]", "1:8: Index value required"},
		{"pool.w[0].id", `1:10: unexpected text after the instance key`},
		{"pool.w.id", `1:7: unexpected attribute after the resource name`},
		{"pool.w[0][1]", "1:10: unexpected text after the instance key"},
		{"module.m.pool.w", "1:1: module addresses are not supported"},
		{"pool w", "1:"},
		{"pool.w[", "1:"},
		{`pool.w["a`, "1:"},
		{"pool.w[*]", "1:"},
		{"1pool.w", "1:1:"},
		{"pool[0]", "1:5: expected a resource name"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseAddress(tt.in)
			if err == nil {
				t.Fatalf("ParseAddress = %#v, want an error", got)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q does not contain %q", err, tt.want)
			}
		})
	}
}

// TestInstanceKeys covers the one normalisation of instance keys, used by
// the state commands and by plan and apply alike. Keys arrive as ints
// (count), strings (for_each) and, from JSON, as float64; each row says what
// the address is and whether it reads back as the same address.
func TestInstanceKeys(t *testing.T) {
	pool := Address{Mode: ModeManaged, Type: "pool", Name: "w"}
	tests := []struct {
		name    string
		key     any
		wantKey any
		want    string
		// parses is whether ParseAddress(want) gives the address back.
		parses bool
	}{
		{"no key", nil, nil, "pool.w", true},
		{"count index", 3, 3, "pool.w[3]", true},
		{"JSON number", float64(3), 3, "pool.w[3]", true},
		{"int64", int64(7), 7, "pool.w[7]", true},
		{"int32", int32(7), 7, "pool.w[7]", true},
		{"uint", uint(7), 7, "pool.w[7]", true},
		{"uint64", uint64(7), 7, "pool.w[7]", true},
		// Not a whole number: kept as it is rather than taken for another
		// instance's key; decoding and writing a state refuse it.
		{"fraction", 2.5, 2.5, "pool.w[2.5]", false},
		{"beyond float precision", float64(1 << 60), float64(1 << 60), "pool.w[1.152921504606847e+18]", false},
		{"for_each key", "a", "a", `pool.w["a"]`, true},
		{"quote and backslash", `a"b\c`, `a"b\c`, `pool.w["a\"b\\c"]`, true},
		// Keys are quoted as HCL strings, not Go ones, so that every address
		// pond prints can be given back to -target, -replace or state
		// commands.
		{"template sequence", "${x}", "${x}", `pool.w["$${x}"]`, true},
		{"control character", "\x01", "\x01", `pool.w["\u0001"]`, true},
		{"unicode", "日本", "日本", `pool.w["日本"]`, true},
		{"empty string", "", "", `pool.w[""]`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := pool.Instance(tt.key)
			if a.Key != tt.wantKey {
				t.Errorf("Instance(%#v).Key = %#v, want %#v", tt.key, a.Key, tt.wantKey)
			}
			if got := a.String(); got != tt.want {
				t.Errorf("String() = %s, want %s", got, tt.want)
			}
			if got := "pool.w" + KeyString(tt.key); got != tt.want {
				t.Errorf("KeyString gives %s, want %s", got, tt.want)
			}
			if a.ResourceAddress() != pool {
				t.Errorf("ResourceAddress() = %#v, want %#v", a.ResourceAddress(), pool)
			}
			back, err := ParseAddress(tt.want)
			if parses := err == nil && back == a; parses != tt.parses {
				t.Errorf("ParseAddress(%s) = %#v, %v; round trip %v, want %v", tt.want, back, err, parses, tt.parses)
			}
		})
	}
}
