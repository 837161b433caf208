package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"

	"github.com/bmlab/bmlab/internal/vbmcd"
)

func main() {
	// client-go (the kubevirt backend's informers) logs failed watches
	// through klog on stderr; the backend reports them itself (machines
	// become Unavailable, with the reason, logged once per outage). klog's
	// logger is process-wide and must be set before anything logs.
	klog.SetLogger(logr.Discard())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := vbmcd.Run(ctx, vbmcd.Streams{Out: os.Stdout, ErrOut: os.Stderr}, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "vbmcd:", err)
		os.Exit(1)
	}
}
