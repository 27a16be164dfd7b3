package submit

import (
	"slices"
	"testing"

	"github.com/pond-htc/pond/condor/classad"
)

// TestCommandAttrs: a job's command line and environment read from the
// attributes CommandAttrs takes of its ad are those of the whole ad.
func TestCommandAttrs(t *testing.T) {
	for _, c := range []struct {
		name, ad  string
		argv, env []string
	}{
		{"none", `[Cmd = "/bin/true"; Owner = "u"]`, nil, nil},
		{"new syntax", `[Arguments = "a 'b c' d"; Environment = "X=1 Y='two words'"]`, []string{"a", "b c", "d"}, []string{"X=1", "Y=two words"}},
		{"old syntax", `[Args = "a b"; Env = "X=1;Y=2"]`, []string{"a", "b"}, []string{"X=1", "Y=2"}},
		{"both, the new first", `[Args = "old"; Arguments = "new"; Env = "X=old"; Environment = "X=new"]`, []string{"new"}, []string{"X=new"}},
		{"any case", `[arguments = "lower case"; ENVIRONMENT = "Z=9"]`, []string{"lower", "case"}, []string{"Z=9"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ad, err := classad.ParseNewAd(c.ad)
			if err != nil {
				t.Fatal(err)
			}
			whole := Job{}
			for _, n := range ad.Names() {
				e, _ := ad.Lookup(n)
				whole[n] = e.String()
			}
			attrs := CommandAttrs(ad)
			for _, get := range []struct {
				what string
				f    func(Job) ([]string, error)
				want []string
			}{{"argv", Argv, c.argv}, {"environment", Environ, c.env}} {
				got, err := get.f(attrs)
				if err != nil {
					t.Fatal(err)
				}
				fromWhole, err := get.f(whole)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(got, get.want) || !slices.Equal(got, fromWhole) {
					t.Errorf("%s = %q, from the whole ad %q, want %q", get.what, got, fromWhole, get.want)
				}
			}
		})
	}
}
