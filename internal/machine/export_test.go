package machine

// SetOnSettleWait makes f run as a power action starts waiting for one
// that only ends its bookkeeping (nil: nothing).
func SetOnSettleWait(f func()) { onSettleWait = f }
