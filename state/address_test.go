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
