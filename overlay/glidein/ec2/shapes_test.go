package ec2

import (
	"testing"

	"github.com/pond-htc/pond/overlay/glidein"
)

// TestInstanceShape checks the shapes of types of each kind of the
// table, and that every type the price table prices has a shape.
func TestInstanceShape(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		typ             string
		cpus, mem, gpus int
		ok              bool
	}{
		{"t3.nano", 2, 512, 0, true},
		{"t3.small", 2, 2048, 0, true},
		{"t3.2xlarge", 8, 32768, 0, true},
		{"m5.large", 2, 8192, 0, true},
		{"m7i.48xlarge", 192, 786432, 0, true},
		{"c5.9xlarge", 36, 73728, 0, true},
		{"c7i.large", 2, 4096, 0, true},
		{"r6i.xlarge", 4, 32768, 0, true},
		{"p3.8xlarge", 32, 249856, 4, true},
		{"g4dn.12xlarge", 48, 196608, 4, true},
		{"c7i.medium", 0, 0, 0, false},
		{"x2iedn.large", 0, 0, 0, false},
		{"nonsense", 0, 0, 0, false},
	} {
		c, m, g, ok := InstanceShape(tc.typ)
		if c != tc.cpus || m != tc.mem || g != tc.gpus || ok != tc.ok {
			t.Errorf("InstanceShape(%s) = %d, %d, %d, %v; want %d, %d, %d, %v", tc.typ, c, m, g, ok, tc.cpus, tc.mem, tc.gpus, tc.ok)
		}
	}
	var types []string
	for fam, f := range families {
		for _, s := range f.sizes {
			types = append(types, fam+"."+s)
		}
	}
	for typ := range gpuPrices {
		types = append(types, typ)
	}
	for _, typ := range types {
		if _, ok := OnDemandPrice("us-east-1", typ); !ok {
			continue
		}
		if c, m, _, ok := InstanceShape(typ); !ok || c < 1 || m < 512 {
			t.Errorf("%s has a price and no shape (%d vCPUs, %d MiB)", typ, c, m)
		}
	}
}

// TestOffers checks that the site offers its instance types in its order,
// with their shapes, and that Submit refuses an offer it does not have.
func TestOffers(t *testing.T) {
	t.Parallel()
	s := &Site{cfg: Config{InstanceTypes: []string{"c7i.large", "x9.huge", "t3.small"}}}
	got := s.Offers()
	if len(got) != 3 || got[0].Name != "c7i.large" || got[0].MemoryMB != 4096 || !got[0].Known ||
		got[1].Name != "x9.huge" || got[1].Known || got[2].Name != "t3.small" || got[2].CPUs != 2 {
		t.Fatalf("offers %+v", got)
	}
	if _, err := s.instanceTypes(glideinRequest("t3.small", "m5.large")); err == nil {
		t.Fatal("an offer not among the instance types was taken")
	}
	its, err := s.instanceTypes(glideinRequest("t3.small", "c7i.large"))
	if err != nil || len(its) != 2 || its[0] != "t3.small" {
		t.Fatalf("instance types %q, %v", its, err)
	}
	if its, _ := s.instanceTypes(glideinRequest()); len(its) != 3 {
		t.Fatalf("no offers: instance types %q, want the site's", its)
	}
}

func glideinRequest(offers ...string) glidein.Request {
	return glidein.Request{ID: "pond-test-1", Args: []string{"agent"}, Offers: offers}
}
