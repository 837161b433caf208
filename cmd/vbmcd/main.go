package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/bmlab/bmlab/internal/vbmcd"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := vbmcd.Run(ctx, vbmcd.Streams{Out: os.Stdout, ErrOut: os.Stderr}, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "vbmcd:", err)
		os.Exit(1)
	}
}
