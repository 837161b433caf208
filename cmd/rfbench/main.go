package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"

	"github.com/bmlab/bmlab/internal/rfbench"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := rfbench.Run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "rfbench:", err)
		os.Exit(1)
	}
}
