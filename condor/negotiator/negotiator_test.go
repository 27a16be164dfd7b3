package negotiator

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/config"
	"github.com/pond-htc/pond/condor/wire"
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

// TestAccountingCarriesOver checks that the accounting a negotiator hands
// to a replica is a copy, and that restoring it keeps each submitter's
// higher usage and drops values that are no usage.
func TestAccountingCarriesOver(t *testing.T) {
	n, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	n.decay(map[string]int{"alice@pool": 3})
	acc := n.Accounting()
	if acc["alice@pool"] < 0.5 {
		t.Fatalf("accounting %v lacks alice", acc)
	}
	acc["alice@pool"] = 1e9 // a copy: the negotiator's own is untouched
	if n.Accounting()["alice@pool"] == 1e9 {
		t.Fatal("Accounting returned the negotiator's own map")
	}
	m, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	m.decay(map[string]int{"bob@pool": 1})
	m.SetAccounting(map[string]float64{"alice@pool": 7, "bob@pool": 0, "mallory@pool": -1, "eve@pool": math.NaN()})
	got := m.Accounting()
	if got["alice@pool"] != 7 || got["bob@pool"] < 0.5 {
		t.Errorf("restored accounting %v: want alice 7 and bob's own usage kept", got)
	}
	for _, bad := range []string{"mallory@pool", "eve@pool"} {
		if _, ok := got[bad]; ok {
			t.Errorf("restored accounting %v holds %s's bad usage", got, bad)
		}
	}
	if p := m.Priorities()["alice@pool"]; p != 7*1000 {
		t.Errorf("alice's priority %v after the restore, want 7000", p)
	}
}

// TestEpochKnob checks that the negotiator takes its epoch from
// POND_CM_EPOCH and refuses a negative one (condor/daemon's
// TestStaleEpochClaimsRefused checks that its matches carry it).
func TestEpochKnob(t *testing.T) {
	cfg := config.New(config.Options{})
	cfg.Set(wire.EpochKnob, "4")
	n, err := New(Options{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	if n.Epoch() != 4 {
		t.Errorf("epoch %d, want 4", n.Epoch())
	}
	bad := config.New(config.Options{})
	bad.Set(wire.EpochKnob, "-2")
	if err := n.Reconfig(bad); err == nil || !strings.Contains(err.Error(), wire.EpochKnob) {
		t.Errorf("a negative epoch: %v, want an error naming the knob", err)
	}
}
