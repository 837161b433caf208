package personality

import "slices"

// Unregister takes a personality a test registered off the list again, so
// the package's own tests see the list as it ships.
func Unregister(name Name) {
	mu.Lock()
	defer mu.Unlock()
	all = slices.DeleteFunc(all, func(p *Personality) bool { return p.Name == name })
}
