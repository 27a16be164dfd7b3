package gossip

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"sync"
	"testing"

	"github.com/pond-htc/pond/overlay/api"
)

// TestUpdateTags checks that an update sets and removes tags, keeps the
// pool and pond tags when emptied, and that concurrent updates each keep
// what the others set.
func TestUpdateTags(t *testing.T) {
	s, err := Start(context.Background(), Config{NodeName: "n", BindAddr: "127.0.0.1:0", Profile: "fast", Insecure: true,
		Tags: map[string]string{api.TagPool: "campus", api.TagPond: "p", "x": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown()
	if err := s.UpdateTags(map[string]string{api.TagPool: "", api.TagPond: "", "x": "", "y": "2"}); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{api.TagPool: "", api.TagPond: "", "y": "2"}
	if got := s.LocalMember().Tags; !maps.Equal(got, want) {
		t.Fatalf("tags %v, want %v", got, want)
	}
	// Each of 40 writers sets its own tag 50 times; an update that read
	// the tags before another's write and wrote after it would undo it.
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Go(func() {
			for j := range 50 {
				if err := s.UpdateTags(map[string]string{fmt.Sprintf("k%d", i): strconv.Itoa(j % 10)}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	for i := range 40 {
		if got := s.LocalMember().Tags[fmt.Sprintf("k%d", i)]; got != "9" {
			t.Errorf("k%d = %q, want 9: a concurrent update undid its last", i, got)
		}
	}
}
