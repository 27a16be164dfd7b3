package schedd

import (
	"strings"
	"testing"
)

// FuzzDigestIgnored: whatever a job factory's submit digest holds, the
// attributes found in it are each of a command a line of it sets.
func FuzzDigestIgnored(f *testing.F) {
	f.Add("arguments = $(Process)\nbuffer_size = 5\nqueue 4\n")
	f.Add("LOAD_PROFILE=true\n=\n\x00=x\nrun_as_owner\n")
	f.Fuzz(func(t *testing.T, digest string) {
		for _, a := range digestIgnored(digest) {
			found := false
			for line := range strings.SplitSeq(digest, "\n") {
				k, _, ok := strings.Cut(line, "=")
				if ok && strings.EqualFold(strings.TrimSpace(k), a.Command) {
					found = true
				}
			}
			if !found {
				t.Fatalf("%s (%s) found in a digest that does not set it: %q", a.Attr, a.Command, digest)
			}
		}
	})
}
