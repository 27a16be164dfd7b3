package acceptance

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// benchSizes is the sizes a benchmark of real agents runs: defaults, or
// the comma-separated list in the environment variable env, each at least
// least. make bench-smoke sets those variables to one small size each, so
// that every benchmark runs once in CI in a few seconds rather than
// starting hundreds of agents.
func benchSizes(b *testing.B, env string, defaults []int, least int) []int {
	b.Helper()
	s := os.Getenv(env)
	if s == "" {
		return defaults
	}
	var sizes []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < least {
			b.Fatalf("%s=%q: want sizes of at least %d, comma-separated", env, s, least)
		}
		sizes = append(sizes, n)
	}
	return sizes
}
