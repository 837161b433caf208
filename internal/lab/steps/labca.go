package steps

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"time"

	"github.com/bmlab/bmlab/internal/ipi"
	"github.com/bmlab/bmlab/internal/pki"
	"github.com/bmlab/bmlab/internal/plan"
)

// ensureLabCA makes the lab's CA (once; its key 0600) and the certificate
// it issues vbmcd for the BMC address, and reports whether the certificate
// is new: one that the CA did not issue, that does not name the BMC address
// or that ends within 30 days is issued again.
func ensureLabCA(p *plan.Plan, now time.Time) (bool, error) {
	if !p.BMC.LabCA {
		return false, nil
	}
	ca, err := pki.EnsureCA(p.Paths.CACert, p.Paths.CAKey, "bmlab lab "+p.Lab+" BMC CA", now)
	if err != nil {
		return false, fmt.Errorf("the lab's CA: %w", err)
	}
	if pair, err := tls.LoadX509KeyPair(p.Paths.BMCCert, p.Paths.BMCKey); err == nil {
		leaf, err := x509.ParseCertificate(pair.Certificate[0])
		if err == nil && leaf.NotAfter.After(now.Add(30*24*time.Hour)) {
			if _, err := leaf.Verify(x509.VerifyOptions{DNSName: p.BMC.Host, Roots: ca.Pool(), CurrentTime: now}); err == nil {
				return false, nil
			}
		}
	}
	if err := ca.IssueServer(p.Paths.BMCCert, p.Paths.BMCKey, []string{p.BMC.Host}, now); err != nil {
		return false, fmt.Errorf("vbmcd's certificate: %w", err)
	}
	return true, nil
}

// InstallCluster is the plan's cluster for install-config, with the lab's
// CA when it has one (before the bmcs step made it, none: the installer's
// rules do not look at it).
func InstallCluster(p *plan.Plan) ipi.Cluster {
	k := IPICluster(p)
	if p.BMC.LabCA {
		if pem, err := os.ReadFile(p.Paths.CACert); err == nil {
			k.BMCVerifyCA = string(pem)
		}
	}
	return k
}
