package providers

import (
	"slices"
	"testing"
)

func TestAgentArgs(t *testing.T) {
	for _, tc := range []struct {
		in   AgentArgs
		want []string
	}{
		{AgentArgs{}, []string{"agent"}},
		{AgentArgs{Name: "n", Pool: "campus", Join: []string{"a:1", "b:2"}, Attrs: []string{"K=1"}, NoGossipCompress: true, TokenFile: "/t"},
			[]string{"agent", "-name", "n", "-gossip-compress=false", "-pool", "campus", "-join", "a:1", "-join", "b:2", "-attr", "K=1", "-token-file", "/t"}},
		{AgentArgs{Join: []string{""}, CondorHost: ""}, []string{"agent"}},
	} {
		if got := tc.in.Args(); !slices.Equal(got, tc.want) {
			t.Errorf("%+v: %q, want %q", tc.in, got, tc.want)
		}
	}
}
