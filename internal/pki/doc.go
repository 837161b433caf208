// Package pki makes a small certificate authority for a lab and the server
// certificates it issues: a CA (ECDSA P-256, its key written 0600) kept in
// two files and reused while valid, and server certificates for given IP
// addresses and DNS names, so that clients (Ironic with OpenShift's
// bmcVerifyCA, python3-sushy with verify=<ca>) verify the BMCs instead of
// trusting any certificate.
//
// It does not revoke, renew by itself, or keep a database of what it issued;
// a lab re-issues a server certificate when its names change.
package pki
