package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"go.uber.org/zap"

	"github.com/bmlab/bmlab/internal/labctl"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	cfg := zap.NewDevelopmentConfig()
	cfg.DisableStacktrace = true
	logger, err := cfg.Build()
	if err != nil {
		fmt.Fprintln(os.Stderr, "ERROR: logger:", err)
		os.Exit(1)
	}
	err = labctl.Run(ctx, logger, labctl.Streams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}, os.Args[1:])
	stop()
	_ = logger.Sync()
	if err != nil {
		fmt.Fprintln(os.Stderr, "ERROR:", err)
		os.Exit(1)
	}
}
