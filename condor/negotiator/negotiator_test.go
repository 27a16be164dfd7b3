package negotiator

import (
	"context"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/config"
)

// TestLoweredMinIntervalAppliesAtOnce checks that a reconfiguration that
// lowers NEGOTIATOR_MIN_INTERVAL applies to the next reschedule request,
// even when the negotiator was already waiting with the old value.
func TestLoweredMinIntervalAppliesAtOnce(t *testing.T) {
	cfg := config.New(config.Options{})
	for k, v := range map[string]string{"NEGOTIATOR_INTERVAL": "3600", "NEGOTIATOR_MIN_INTERVAL": "3600"} {
		if err := cfg.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	cycles := make(chan struct{}, 16)
	n, err := New(Options{Config: cfg, Now: func() time.Time {
		cycles <- struct{}{}
		return time.Now()
	}})
	if err != nil {
		t.Fatal(err)
	}
	<-cycles // New reads the clock once
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = n.Run(ctx)
	}()
	<-cycles // the first cycle runs at once

	fast := config.New(config.Options{})
	if err := fast.Set("NEGOTIATOR_MIN_INTERVAL", "0"); err != nil {
		t.Fatal(err)
	}
	if err := n.Reconfig(fast); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Reschedule(ctx, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case <-cycles:
	case <-time.After(time.Minute):
		t.Fatal("no cycle after a reschedule with NEGOTIATOR_MIN_INTERVAL lowered to 0: the old hour still applies")
	}
	cancel()
	<-done
}
