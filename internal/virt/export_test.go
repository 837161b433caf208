package virt

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
