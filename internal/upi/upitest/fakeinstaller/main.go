package main

import (
	"os"

	"github.com/bmlab/bmlab/internal/upi/upitest"
)

func main() {
	os.Exit(upitest.Main(os.Args[1:], os.Stdout, os.Stderr))
}
