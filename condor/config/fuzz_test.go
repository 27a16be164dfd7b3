package config

import "testing"

func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"A = 1\nB = $(A)\n",
		"A = $(B)\nB = $(A)\n",
		"use ROLE:Personal\nif defined A\nX = 1\nelif version > 8.0\nX = 2\nelse\nX = 3\nendif\n",
		"A @=x\nline\n@x\n",
		"L = a \\\n b\nI = $INT(L) $REAL(L,%.2f) $CHOICE(1,a,b) $SUBSTR(L,-1)\n",
		"E = $ENV(HOME:x) $$(Memory) $(DOLLAR)\n",
		"use FEATURE:PartitionableSlot(1, cpus=2)\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		c := New(Options{LookupEnv: func(string) (string, bool) { return "", false }, Host: HostInfo{Hostname: "h", FullHostname: "h", IPAddress: "127.0.0.1", CPUs: 1, MemoryMB: 1}})
		if err := c.ParseInto("fuzz.cfg", src); err != nil {
			return
		}
		for _, n := range c.Names() {
			c.Get(n)
			c.Int(n, 0)
			c.Bool(n, false)
		}
		c.SlotTypes()
	})
}
