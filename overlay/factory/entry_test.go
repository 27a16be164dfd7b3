package factory

import (
	"github.com/pond-htc/pond/overlay/api"
	"testing"
)

// TestMachineAds checks the ads a glidein of a template would advertise:
// one partitionable slot with the template's resources, or static slots
// sharing them.
func TestMachineAds(t *testing.T) {
	tpl := api.FactoryTemplate{CPUs: 4, MemoryMB: 8000, GPUs: 2, Attributes: map[string]string{"HasCvmfs": "true"}}
	ads, err := tpl.MachineAds("g")
	if err != nil || len(ads) != 1 {
		t.Fatalf("%d ads, %v", len(ads), err)
	}
	if c, _ := ads[0].EvalAttr("Cpus").IntValue(); c != 4 {
		t.Errorf("Cpus %d", c)
	}
	if p, _ := ads[0].EvalAttr("PartitionableSlot").BoolValue(); !p {
		t.Error("not partitionable")
	}
	if v, _ := ads[0].EvalAttr("HasCvmfs").BoolValue(); !v {
		t.Error("attribute missing")
	}
	tpl.Slots = 2
	ads, _ = tpl.MachineAds("g")
	if len(ads) != 2 {
		t.Fatalf("%d ads", len(ads))
	}
	if m, _ := ads[1].EvalAttr("Memory").IntValue(); m != 4000 {
		t.Errorf("Memory %d", m)
	}
}
