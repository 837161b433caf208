package virt

import (
	"testing"

	"github.com/bmlab/bmlab/internal/machine"
)

// TestSameMachineComparesValues: two reads of an unchanged domain are the
// same machine even though pointers in them (the IPMI endpoint) differ, so
// its generation, and every face's cache keyed by it, survives a refresh.
func TestSameMachineComparesValues(t *testing.T) {
	mk := func(port int, turbo string) *machine.Machine {
		m := &machine.Machine{ID: "u", Name: "n", Power: machine.PowerOn, Generation: uint64(port)}
		m.Settings = machine.DefaultSettings(machine.BootModeUEFI, false)
		m.Settings.IPMI = &machine.IPMIEndpoint{Port: port}
		m.Settings.BIOS["ProcTurboMode"] = turbo
		return m
	}
	if !sameMachine(mk(6230, "Enabled"), mk(6230, "Enabled")) {
		t.Errorf("equal snapshots with distinct pointers compared unequal")
	}
	if sameMachine(mk(6230, "Enabled"), mk(6231, "Enabled")) {
		t.Errorf("a changed IPMI port went unnoticed")
	}
	if sameMachine(mk(6230, "Enabled"), mk(6230, "Disabled")) {
		t.Errorf("a changed BIOS attribute went unnoticed")
	}
}
