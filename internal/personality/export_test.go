package personality

import "slices"

// Unregister takes a personality a test registered off the list again, so
// the package's own tests see the list as it ships.
func Unregister(name Name) {
	registerMu.Lock()
	defer registerMu.Unlock()
	l := slices.DeleteFunc(slices.Clone(list()), func(p *Personality) bool { return p.Name == name })
	current.Store(&l)
}
