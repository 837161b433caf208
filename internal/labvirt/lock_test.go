package labvirt

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestSharedLockExcludes: two changers of one shared network take turns
// (flock: across labctl processes too), another network's changer does
// not wait, and a waiter gives up with its context.
func TestSharedLockExcludes(t *testing.T) {
	old := SharedLockDir
	SharedLockDir = t.TempDir()
	t.Cleanup(func() { SharedLockDir = old })
	ctx := context.Background()
	unlock, err := lockShared(ctx, "shnet")
	if err != nil {
		t.Fatal(err)
	}
	other, err := lockShared(ctx, "othernet")
	if err != nil {
		t.Fatal(err)
	}
	other()
	got := make(chan func())
	go func() {
		u, err := lockShared(ctx, "shnet")
		if err != nil {
			t.Error(err)
			u = func() {}
		}
		got <- u
	}()
	select {
	case u := <-got:
		u()
		t.Fatal("a second changer took the lock while the first held it")
	case <-time.After(300 * time.Millisecond): // the window in which it must wait
	}
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if _, err := lockShared(short, "shnet"); err == nil || !strings.Contains(err.Error(), "waiting for another labctl to finish with shared network shnet") {
		t.Errorf("a waiter with a short context: %v", err)
	}
	unlock()
	select {
	case u := <-got:
		u()
	case <-time.After(5 * time.Second):
		t.Fatal("the second changer never got the lock after the first let go")
	}
}
