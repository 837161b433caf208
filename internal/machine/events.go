package machine

import "sync"

// Broadcaster fans events out to subscribers without ever blocking the
// sender: a subscriber that falls 256 events behind loses events. The zero
// value is ready to use.
type Broadcaster struct {
	mu   sync.Mutex
	next int
	subs map[int]chan Event
}

// Subscribe returns a channel of events and a function that ends the
// subscription and closes the channel.
func (b *Broadcaster) Subscribe() (<-chan Event, func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.subs == nil {
		b.subs = map[int]chan Event{}
	}
	id := b.next
	b.next++
	ch := make(chan Event, 256)
	b.subs[id] = ch
	return ch, func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if c, ok := b.subs[id]; ok {
			delete(b.subs, id)
			close(c)
		}
	}
}

// Send delivers ev to every subscriber that has room for it.
func (b *Broadcaster) Send(ev Event) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, ch := range b.subs {
		select {
		case ch <- ev:
		default:
		}
	}
}
