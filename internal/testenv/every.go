package testenv

import "time"

// Every calls f every d, i counting the calls from 0, on a goroutine of
// its own until f returns false or stop is called; stop returns once that
// goroutine has ended.
func Every(d time.Duration, f func(i int) bool) (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-quit:
				return
			case <-time.After(d):
			}
			if !f(i) {
				return
			}
		}
	}()
	return func() {
		close(quit)
		<-done
	}
}
