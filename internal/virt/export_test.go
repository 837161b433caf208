package virt

import (
	"github.com/digitalocean/go-libvirt"

	"github.com/bmlab/bmlab/internal/machine"
)

// Signatures exposes the boot signatures behind Stale to tests.
func (b *Backend) Signatures(id string) (live, next string) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	e, err := b.find(id)
	if err != nil {
		return "", ""
	}
	return e.live, e.next
}

// FillSwitches exposes fillSwitches (the NICs' LLDP from their networks) to
// tests.
func FillSwitches(l *libvirt.Libvirt, nics []machine.NIC) { fillSwitches(l, nics) }
