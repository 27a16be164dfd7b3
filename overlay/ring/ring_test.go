package ring

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

func id(b byte) ID {
	var x ID
	x[0] = b
	return x
}

func iv(b, e byte) Interval { return Interval{Begin: id(b), End: id(e)} }

func TestArithmetic(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 1000 {
		var a, b ID
		for i := range a {
			a[i], b[i] = byte(r.Uint32()), byte(r.Uint32())
		}
		if got := a.Add(b).Sub(b); got != a {
			t.Fatalf("(%v+%v)-%v = %v", a, b, b, got)
		}
		if got := a.Add(a.Not()); got != (ID{}).Not() {
			t.Fatalf("a + ^a = %v, want all ones", got)
		}
	}
	if f := Pow2(159).Fraction(); f != 0.5 {
		t.Errorf("Pow2(159).Fraction() = %v, want 0.5", f)
	}
}

func TestIntervalContains(t *testing.T) {
	tests := []struct {
		iv   Interval
		x    byte
		want bool
	}{
		{iv(10, 20), 10, true},
		{iv(10, 20), 19, true},
		{iv(10, 20), 20, false},
		{iv(10, 20), 9, false},
		{iv(200, 20), 250, true},
		{iv(200, 20), 5, true},
		{iv(200, 20), 100, false},
		{iv(7, 7), 100, true},
	}
	for _, tt := range tests {
		if got := tt.iv.Contains(id(tt.x)); got != tt.want {
			t.Errorf("%v.Contains(%d) = %v, want %v", tt.iv, tt.x, got, tt.want)
		}
	}
}

func TestMirror(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 2000 {
		a, b, x := byte(r.Uint32()), byte(r.Uint32()), byte(r.Uint32())
		if a == b {
			continue
		}
		in := iv(a, b)
		var xi ID
		xi[0] = x
		xi[19] = byte(r.Uint32())
		if got, want := in.Mirror().Contains(xi), in.Contains(xi.Not()); got != want {
			t.Fatalf("%v.Mirror().Contains(%v) = %v, want %v", in, xi, got, want)
		}
		if in.Mirror().Mirror() != in {
			t.Fatalf("Mirror is not an involution for %v", in)
		}
	}
}

func TestUnionComplement(t *testing.T) {
	tests := []struct {
		name string
		base byte
		in   []Interval
		want []Interval
		miss []Interval
	}{
		{"empty", 0, nil, nil, []Interval{Full()}},
		{"adjacent", 0, []Interval{iv(10, 20), iv(20, 30)}, []Interval{iv(10, 30)}, []Interval{iv(30, 10)}},
		{"overlap unordered", 0, []Interval{iv(25, 40), iv(10, 30)}, []Interval{iv(10, 40)}, []Interval{iv(40, 10)}},
		{"disjoint", 0, []Interval{iv(50, 60), iv(10, 20)}, []Interval{iv(10, 20), iv(50, 60)}, []Interval{iv(20, 50), iv(60, 10)}},
		{"whole from pieces", 100, []Interval{iv(100, 200), iv(200, 100)}, []Interval{Full()}, nil},
		{"wrapping", 0, []Interval{iv(250, 5), iv(5, 10)}, []Interval{iv(250, 10)}, []Interval{iv(10, 250)}},
		{"wrapping past base", 100, []Interval{iv(90, 110)}, []Interval{iv(90, 110)}, []Interval{iv(110, 90)}},
		{"full absorbs", 0, []Interval{iv(1, 2), Full()}, []Interval{Full()}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Union(id(tt.base), tt.in)
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("Union = %v, want %v", got, tt.want)
			}
			miss := Complement(id(tt.base), tt.in)
			if fmt.Sprint(miss) != fmt.Sprint(tt.miss) {
				t.Errorf("Complement = %v, want %v", miss, tt.miss)
			}
		})
	}
}

func testView(n int) *View {
	ms := make([]Member, n)
	for i := range ms {
		ms[i] = NewMember(fmt.Sprintf("node-%d", i), "")
	}
	return NewView(ms)
}

func TestCountAndIn(t *testing.T) {
	v := testView(500)
	r := rand.New(rand.NewPCG(5, 6))
	for range 300 {
		var a, b ID
		a[0], a[1] = byte(r.Uint32()), byte(r.Uint32())
		b[0], b[1] = byte(r.Uint32()), byte(r.Uint32())
		in := Interval{a, b}
		want := 0
		for _, m := range v.Members() {
			if in.Contains(m.ID) {
				want++
			}
		}
		if got := v.Count(in); got != want {
			t.Fatalf("Count(%v) = %d, want %d", in, got, want)
		}
		got := v.In(in, -1)
		if len(got) != want {
			t.Fatalf("In(%v) has %d members, want %d", in, len(got), want)
		}
		for _, m := range got {
			if !in.Contains(m.ID) {
				t.Fatalf("In(%v) returned %s outside it", in, m.Name)
			}
		}
	}
}

func TestTable(t *testing.T) {
	for _, n := range []int{1, 2, 5, 64, 1000, 20000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			v := testView(n)
			for _, self := range []int{0, n / 2, n - 1} {
				tab := v.Table(self, TableConfig{})
				if n == 1 {
					if len(tab) != 0 {
						t.Fatalf("single member has table %v", tab)
					}
					continue
				}
				has := map[string]bool{}
				for _, m := range tab {
					if m.Name == v.At(self).Name {
						t.Fatalf("table of %d contains self", self)
					}
					if has[m.Name] {
						t.Fatalf("table of %d repeats %s", self, m.Name)
					}
					has[m.Name] = true
				}
				if !has[v.At((self+1)%n).Name] || !has[v.At((self-1+n)%n).Name] {
					t.Fatalf("table of %d lacks its immediate neighbours", self)
				}
				if limit := 6 + 2*(log2Ceil(n)+1); len(tab) > limit {
					t.Fatalf("table of %d has %d entries, more than %d", self, len(tab), limit)
				}
			}
		})
	}
}

func TestIndex(t *testing.T) {
	v := testView(100)
	for i := range v.Len() {
		j, ok := v.Index(v.At(i).Name)
		if !ok || j != i {
			t.Fatalf("Index(%q) = %d, %v; want %d", v.At(i).Name, j, ok, i)
		}
	}
	if _, ok := v.Index("absent"); ok {
		t.Fatal("Index found an absent member")
	}
}

func TestParseID(t *testing.T) {
	x := IDOf("a")
	got, err := ParseID(x.String())
	if err != nil || got != x {
		t.Fatalf("ParseID(%s) = %v, %v", x, got, err)
	}
	for _, bad := range []string{"", "zz", x.String()[:39] + "g"} {
		if _, err := ParseID(bad); err == nil {
			t.Errorf("ParseID(%q) succeeded", bad)
		}
	}
}

func FuzzParseID(f *testing.F) {
	f.Add(IDOf("seed").String())
	f.Add("00")
	f.Fuzz(func(t *testing.T, s string) {
		x, err := ParseID(s)
		if err != nil {
			return
		}
		if y, err := ParseID(x.String()); err != nil || y != x {
			t.Fatalf("round trip of %q: %v, %v", s, y, err)
		}
	})
}

func FuzzUnion(f *testing.F) {
	f.Add([]byte{0, 10, 20, 20, 30, 250, 5})
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == 0 {
			return
		}
		var ivs []Interval
		for i := 1; i+1 < len(b); i += 2 {
			ivs = append(ivs, iv(b[i], b[i+1]))
		}
		u := Union(id(b[0]), ivs)
		c := Complement(id(b[0]), ivs)
		for x := range 256 {
			p := id(byte(x))
			in := false
			for _, v := range ivs {
				in = in || v.Contains(p)
			}
			inU, inC := false, false
			for _, v := range u {
				inU = inU || v.Contains(p)
			}
			for _, v := range c {
				inC = inC || v.Contains(p)
			}
			if in != inU || in == inC {
				t.Fatalf("point %d: in=%v union=%v complement=%v (ivs %v)", x, in, inU, inC, ivs)
			}
		}
	})
}

func BenchmarkTable(b *testing.B) {
	v := testView(1 << 20)
	b.ResetTimer()
	for i := range b.N {
		_ = v.Table(i%v.Len(), TableConfig{})
	}
}
