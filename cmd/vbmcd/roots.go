package main

// Mozilla's root certificates, from golang.org/x/crypto/x509roots/fallback
// at the version go.mod pins, which crypto/x509 uses only where the host
// has no roots of its own: in vbmcd's image (make image), which carries no
// CA bundle of the build host's, so that its digest does not depend on who
// builds it, while vbmcd still checks image servers' certificates against
// the public roots there (--media-ca-file adds a lab's own CA).
import _ "golang.org/x/crypto/x509roots/fallback"
