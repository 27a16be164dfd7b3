package collector

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/wire"
)

// TestQueryConstraintDoesNotHoldUpdates: an update is taken while a
// query's constraint is being evaluated over the stored ads: the
// constraint is evaluated without the collector's lock, so that the
// updates of a big pool do not wait (each holding its parsed ads) behind
// a query of every slot on a loaded machine.
func TestQueryConstraintDoesNotHoldUpdates(t *testing.T) {
	c := New(Options{})
	slot := func(n int) wire.Ad {
		return wire.Ad{"Name": fmt.Sprintf(`"slot%d@node"`, n), "Machine": `"node"`, "State": `"Unclaimed"`}
	}
	if err := c.update(nil, &wire.UpdateRequest{Type: wire.TypeMachine, Source: "startd@node", Ads: []wire.Ad{slot(1), slot(2)}}); err != nil {
		t.Fatal(err)
	}
	// The query's constraint waits, on its first ad, for an update to
	// be taken.
	updated := make(chan error, 1)
	first := true
	done := make(chan []*entry, 1)
	go func() {
		done <- c.entries(wire.TypeMachine, func(*classad.Ad) bool {
			if first {
				first = false
				go func() {
					updated <- c.update(nil, &wire.UpdateRequest{Type: wire.TypeMachine, Source: "startd@other", Ads: []wire.Ad{slot(3)}})
				}()
				select {
				case err := <-updated:
					updated <- err
				case <-time.After(5 * time.Second):
				}
			}
			return true
		})
	}()
	picked := <-done
	select {
	case err := <-updated:
		if err != nil {
			t.Fatal(err)
		}
	default:
		t.Fatal("an update waited for a query's constraint to be evaluated over every ad")
	}
	if len(picked) != 2 {
		t.Errorf("the query picked %d ads, want the 2 stored when it began", len(picked))
	}
}

// TestUpdateOfAGoneSenderDropped: an update whose sender gave up (its
// request's context ended) while it waited for its turn, or before it was
// taken, is not stored: the sender sends every ad again in its next one,
// and the late one would replace newer ads.
func TestUpdateOfAGoneSenderDropped(t *testing.T) {
	ad := wire.Ad{"Name": `"slot1@node"`, "Machine": `"node"`, "State": `"Unclaimed"`}
	for _, tc := range []struct {
		name string
		busy bool // every turn taken by updates in progress
	}{{"gave up before", false}, {"gave up waiting", true}} {
		t.Run(tc.name, func(t *testing.T) {
			c := New(Options{})
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			if tc.busy {
				for range cap(c.admit) {
					c.admit <- struct{}{}
				}
			} else {
				cancel()
			}
			start := time.Now()
			_, err := c.Update(ctx, &wire.UpdateRequest{Type: wire.TypeMachine, Source: "startd@node", Ads: []wire.Ad{ad}})
			if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("the update of a sender gone: %v, want its context's error", err)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("the update waited %s after its sender gave up", d)
			}
			if got := c.entries(wire.TypeMachine, func(*classad.Ad) bool { return true }); len(got) != 0 {
				t.Errorf("the collector stored %d ads of an update whose sender gave up", len(got))
			}
		})
	}
}

// TestUpdateOverAPIDecodedInItsTurn: an update over the API waits for its
// turn holding only its body's bytes, and is decoded then: a body that
// does not decode is answered only once a turn is free. An update whose
// sender gave up while it waited is dropped.
func TestUpdateOverAPIDecodedInItsTurn(t *testing.T) {
	c := New(Options{})
	srv := httptest.NewServer(c.Handler())
	t.Cleanup(srv.Close)
	for range cap(c.admit) {
		c.admit <- struct{}{}
	}
	post := func(ctx context.Context, body string) (int, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/update", strings.NewReader(body))
		if err != nil {
			return 0, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}

	// Given up while waiting: dropped.
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	ad := `{"type":"Machine","source":"startd@node","ads":[{"Name":"\"slot1@node\"","Machine":"\"node\""}]}`
	if _, err := post(ctx, ad); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("an update while every turn is taken: %v, want its sender's deadline", err)
	}

	// Not decoded before its turn.
	answered := make(chan int, 1)
	go func() {
		code, err := post(context.Background(), "{not JSON")
		if err != nil {
			t.Error(err)
		}
		answered <- code
	}()
	select {
	case code := <-answered:
		t.Fatalf("a body that does not decode was answered %d while every turn was taken", code)
	case <-time.After(300 * time.Millisecond):
	}
	<-c.admit
	select {
	case code := <-answered:
		if code != http.StatusBadRequest {
			t.Errorf("a body that does not decode: %d, want 400", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the update was not answered once a turn was free")
	}
	if got := c.entries(wire.TypeMachine, func(*classad.Ad) bool { return true }); len(got) != 0 {
		t.Errorf("the collector stored %d ads of an update whose sender gave up", len(got))
	}
}
