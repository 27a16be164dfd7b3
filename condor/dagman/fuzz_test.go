package dagman

import (
	"errors"
	"testing"
)

func FuzzParse(f *testing.F) {
	f.Add(diamond)
	f.Add(manual)
	f.Add("JOB A a.sub\nVARS A k=\"a\\\"b\" j=\"\"\nPARENT A CHILD A\n")
	f.Add("SPLICE S s.dag\nJOB A a\nPARENT S CHILD A\n")
	f.Fuzz(func(t *testing.T, text string) {
		p := &parser{readFile: func(string) ([]byte, error) { return nil, errors.New("no files") }}
		d, err := p.parse("f.dag", []byte(text), "", 0)
		if err == nil {
			err = d.link()
		}
		if err != nil {
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("error of type %T: %v", err, err)
			}
			return
		}
		for _, n := range d.Nodes {
			for _, c := range n.Children {
				if d.Node(c) == nil {
					t.Fatalf("child %s of %s is no node", c, n.Name)
				}
			}
		}
	})
}
