package submit

import (
	"context"
	"testing"
)

func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"executable = /bin/echo\narguments = \"a 'b c'\"\nqueue 2\n",
		"executable = x\nqueue x in (a, b, c)\n",
		"executable = x\nqueue a,b from (\n1 2\n3, 4\n)\n",
		"executable = x\nenvironment = \"A=1 B='x y'\"\nrequest_memory = 2GB\n+Foo = \"bar\"\nqueue\n",
		"executable = $(a)\na = $(b)\nb = $(a)\nqueue\n",
		"executable = x\nqueue x in [::-1] (a b c)\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		file, err := Parse("fuzz.sub", src)
		if err != nil {
			return
		}
		opts := testOpts(t.TempDir())
		opts.MaxJobs = 1000
		opts.ReadFile = func(string) ([]byte, error) { return []byte("a b\nc d\n"), nil }
		opts.Glob = func(string) ([]string, error) { return nil, nil }
		jobs, err := file.Jobs(context.Background(), opts)
		if err != nil {
			return
		}
		for _, j := range jobs {
			if _, err := Argv(j); err != nil {
				t.Fatalf("job arguments do not decode: %v (%q / %q)", err, j["Arguments"], j["Args"])
			}
			if _, err := Environ(j); err != nil {
				t.Fatalf("job environment does not decode: %v (%q)", err, j["Environment"])
			}
		}
	})
}

// FuzzFactoryFromDigest checks that a digest from a submitter, however
// made, is refused with an error or makes jobs, never a panic.
func FuzzFactoryFromDigest(f *testing.F) {
	f.Add([]byte(`{"name":"j.sub","source":"executable=/bin/true\nqueue 2\n","cluster":3,"owner":"u","max_jobs":10}`))
	f.Add([]byte(`{"name":"j.sub","source":"queue x from f\n","cluster":3,"owner":"u","max_jobs":10,"files":{"/f":"a\nb"}}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := FactoryFromDigest(context.Background(), data, nil)
		if err != nil {
			return
		}
		for proc := 0; proc < min(p.Total(), 3); proc++ {
			_, _ = p.Job(proc)
		}
	})
}
