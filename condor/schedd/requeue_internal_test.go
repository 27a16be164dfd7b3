package schedd

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/jobqueue"
	"github.com/pond-htc/pond/condor/wire"
)

// TestActivationFailedRequeuesAfterItsDeadline requeues jobs whose
// activation failed with a context already spent, as when the queue's
// database kept the first requeue waiting for its whole minute (a mass
// removal of thousands of jobs writing): the requeue is made again, with
// time of its own, and the job goes back to the idle jobs the negotiator
// is offered, not left Running without a claim. A job held meanwhile
// stays held.
func TestActivationFailedRequeuesAfterItsDeadline(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		err        error
		holdFirst  bool
		want       jobqueue.Status
		exceptions string
	}{
		{"refused", &wire.Error{Status: http.StatusNotFound, Msg: "unknown claim id"}, false, jobqueue.Idle, ""},
		{"refused, held meanwhile", &wire.Error{Status: http.StatusNotFound, Msg: "unknown claim id"}, true, jobqueue.Held, ""},
		{"the starter lost", errors.New("connection reset by peer"), false, jobqueue.Idle, "1"},
		{"the starter lost, held meanwhile", errors.New("connection reset by peer"), true, jobqueue.Held, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newTestSchedd(t)
			ctx := context.Background()
			id := queueJob(t, s, "alice")
			if err := s.q.Transition(ctx, id, jobqueue.Idle, nil); err != nil {
				t.Fatal(err)
			}
			if err := s.q.Transition(ctx, id, jobqueue.Running, nil); err != nil {
				t.Fatal(err)
			}
			if tt.holdFirst {
				if _, err := s.q.Hold(ctx, jobqueue.OneJob(id), "held by hand", 1, 0); err != nil {
					t.Fatal(err)
				}
			}
			j, err := s.q.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			ij, err := s.parseJob(j)
			if err != nil {
				t.Fatal(err)
			}
			spent, cancel := context.WithCancel(ctx)
			cancel()
			c := &claim{id: "c1", job: id, slotName: "slot1@exec"}
			start := time.Now()
			s.activationFailed(spent, c, id, ij, tt.err)
			j, err = s.q.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if j.Status != tt.want {
				t.Fatalf("the job is %s after %v, want %s", j.Status, time.Since(start).Round(time.Millisecond), tt.want)
			}
			if got := j.Ad["NumShadowExceptions"]; tt.want == jobqueue.Idle && got != tt.exceptions {
				t.Errorf("NumShadowExceptions = %q, want %q", got, tt.exceptions)
			}
			s.mu.Lock()
			filed := s.idle.len()
			s.mu.Unlock()
			if want := map[bool]int{true: 1, false: 0}[tt.want == jobqueue.Idle]; filed != want {
				t.Errorf("%d idle jobs filed for the negotiator, want %d", filed, want)
			}
		})
	}
}
