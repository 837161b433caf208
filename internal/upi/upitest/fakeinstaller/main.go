// Command fakeinstaller is the test fixture standing in for openshift-install
// (see package upitest): it writes realistic manifests and ignition configs and
// answers wait-for with the exit codes the test chooses.
package main

import (
	"os"

	"github.com/bmlab/bmlab/internal/upi/upitest"
)

func main() {
	os.Exit(upitest.Main(os.Args[1:], os.Stdout, os.Stderr))
}
