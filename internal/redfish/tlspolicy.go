package redfish

import (
	"crypto/tls"
	"fmt"
	"slices"
	"strings"
)

// TLS policy a user sets (vbmcd's --tls-min-version, --tls-cipher-suites):
// what a client such as Ironic, whose conductor may be told to insist on
// TLS 1.3 or on given suites, finds on the BMC.

// TLSVersions are the minimum versions a policy may name.
var TLSVersions = map[string]uint16{"1.2": tls.VersionTLS12, "1.3": tls.VersionTLS13}

// TLSSuiteNames lists the TLS 1.2 cipher suites a policy may name: Go's
// secure ones (IANA names), forward secret and AEAD.
func TLSSuiteNames() []string {
	var out []string
	for _, s := range tls.CipherSuites() {
		if slices.Contains(s.SupportedVersions, tls.VersionTLS12) && slices.Contains(aeadSuites, s.ID) {
			out = append(out, s.Name)
		}
	}
	return out
}

// ApplyTLSPolicy sets cfg's minimum version ("" keeps 1.2) and TLS 1.2
// cipher suites (none keeps every AEAD suite). TLS 1.3's suites are not
// configurable (Go's crypto/tls), so suites with a 1.3 minimum are
// refused rather than silently ignored.
func ApplyTLSPolicy(cfg *tls.Config, minVersion string, suites []string) error {
	if minVersion != "" {
		v, ok := TLSVersions[minVersion]
		if !ok {
			return fmt.Errorf("TLS minimum version %q: want 1.2 or 1.3", minVersion)
		}
		cfg.MinVersion = v
	}
	if len(suites) == 0 {
		return nil
	}
	if cfg.MinVersion >= tls.VersionTLS13 {
		return fmt.Errorf("TLS cipher suites apply to TLS 1.2; with a 1.3 minimum they cannot be chosen")
	}
	allowed := TLSSuiteNames()
	var ids []uint16
	for _, name := range suites {
		name = strings.TrimSpace(name)
		i := slices.Index(allowed, name)
		if i < 0 {
			return fmt.Errorf("TLS cipher suite %q: want some of %s", name, strings.Join(allowed, ", "))
		}
		for _, s := range tls.CipherSuites() {
			if s.Name == name && !slices.Contains(ids, s.ID) {
				ids = append(ids, s.ID)
			}
		}
	}
	// HTTP/2 over TLS (RFC 7540 §9.2.2, and Go's net/http) needs an
	// AES-128-GCM suite; without one the server would not start.
	if !slices.Contains(ids, tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256) && !slices.Contains(ids, tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256) {
		return fmt.Errorf("TLS cipher suites: HTTP/2 needs TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256 or TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 among them")
	}
	cfg.CipherSuites = ids
	return nil
}
