package virt_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/bmlab/bmlab/internal/virt"
)

// TestDialerFor: each URI scheme gets its go-libvirt dialer; a remote
// scheme without a host and an unknown scheme are refused with the forms
// that work.
func TestDialerFor(t *testing.T) {
	for uri, want := range map[string]string{
		"qemu:///system":                                               "*dialers.Local",
		"qemu+unix:///system?socket=/run/x.sock":                       "*dialers.Local",
		"qemu+tcp://10.9.0.1:16509/system":                             "*dialers.Remote",
		"qemu+tls://beta.lab/system?pkipath=/etc/pki/beta&no_verify=1": "*dialers.TLS",
		"qemu+ssh://root@beta.lab:2222/system?keyfile=/k&no_verify=1":  "*dialers.SSH",
	} {
		d, target, err := virt.DialerFor(uri)
		if err != nil {
			t.Errorf("%s: %v", uri, err)
			continue
		}
		if got := fmt.Sprintf("%T", d); got != want || target != "qemu:///system" {
			t.Errorf("%s: %s to %s, want %s to qemu:///system", uri, got, target, want)
		}
	}
	for uri, want := range map[string]string{
		"qemu+tcp:///system": "needs a host",
		"xen://h/system":     `scheme "xen" is not supported`,
	} {
		if _, _, err := virt.DialerFor(uri); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", uri, err, want)
		}
	}
}
