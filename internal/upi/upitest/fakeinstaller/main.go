package main

import (
	"os"
	"path/filepath"

	"github.com/bmlab/bmlab/internal/upi/upitest"
)

func main() {
	if filepath.Base(os.Args[0]) == "oc" {
		os.Exit(upitest.OCMain(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(upitest.Main(os.Args[1:], os.Stdout, os.Stderr))
}
