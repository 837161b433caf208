package main

import (
	"os"
	"path/filepath"

	"github.com/bmlab/bmlab/internal/installertest"
)

func main() {
	if filepath.Base(os.Args[0]) == "oc" {
		os.Exit(installertest.OCMain(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(installertest.Main(os.Args[1:], os.Stdout, os.Stderr))
}
