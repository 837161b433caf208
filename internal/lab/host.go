package lab

import (
	"context"
	"errors"
	"net/netip"
	"time"

	"github.com/bmlab/bmlab/internal/labvirt"
	"github.com/bmlab/bmlab/internal/netplumb"
	"github.com/bmlab/bmlab/internal/plan"
)

// Kind is a kind of object a lab owns on its host.
type Kind string

// The kinds of objects.
const (
	KindDomain  Kind = "domain"
	KindNetwork Kind = "libvirt network"
	KindPool    Kind = "storage pool"
	KindVolume  Kind = "volume" // named pool/volume
	KindLink    Kind = "link"
)

// ErrForeign means an object with a lab name does not bear the lab's mark.
var ErrForeign = errors.New("not the lab's")

// Host is what the actions need of the lab's host. Every method is
// idempotent; Ensure methods report whether they changed anything; Delete
// treats "absent" as success and refuses (ErrForeign) an object that does
// not bear the lab's mark.
type Host interface {
	// Owner says whether the object exists and whose mark it bears ("" for
	// none: foreign).
	Owner(ctx context.Context, kind Kind, name string) (found bool, owner string, err error)
	// Marked lists the objects of a kind that bear lab's mark.
	Marked(ctx context.Context, kind Kind, lab string) ([]string, error)
	// Delete removes an object of lab's.
	Delete(ctx context.Context, kind Kind, name, lab string) error

	EnsureNAT(ctx context.Context, spec labvirt.LabNetworkSpec) (bool, error)
	EnsureBridgeNetwork(ctx context.Context, spec labvirt.NetworkSpec) (bool, error)
	// NetworkCIDRs are the addresses of every libvirt network, by name.
	NetworkCIDRs(ctx context.Context) (map[string][]netip.Prefix, error)
	EnsureLinks(ctx context.Context, lab string, t netplumb.Topology) (bool, error)
	// LinkDifferences is what `net check` reports for the topology.
	LinkDifferences(ctx context.Context, lab string, t netplumb.Topology) ([]netplumb.Difference, error)

	EnsurePool(ctx context.Context, spec labvirt.PoolSpec) (bool, error)
	EnsureVolume(ctx context.Context, spec labvirt.VolumeSpec) (bool, error)
	// DanglingPools are pools whose directory is gone.
	DanglingPools(ctx context.Context) ([]labvirt.DanglingPool, error)
	DeleteDanglingPool(ctx context.Context, name string) error

	DefineDomain(ctx context.Context, spec labvirt.DomainSpec) error
	// DomainMarks are the marks' attributes of every marked domain, by
	// domain, whichever lab's.
	DomainMarks(ctx context.Context) (map[string]map[string]string, error)
	// Start starts a domain (false when it runs already).
	Start(ctx context.Context, name string) (bool, error)
	// Power is a domain's power state (On, Off, ..., absent).
	Power(ctx context.Context, name string) (string, error)
	// SetIPMIPort records a node's IPMI endpoint with its domain.
	SetIPMIPort(ctx context.Context, uuid string, port int) (bool, error)

	// Daemons are the running processes marked as lab's.
	Daemons(ctx context.Context, lab string) ([]Daemon, error)
	StartDaemon(ctx context.Context, v plan.Vbmcd, netns string) (Daemon, error)
	StopDaemon(ctx context.Context, pid int) error
	// CheckBMCs waits until every node's BMC answers with its UUID at the
	// plan's address, reached from the lab's namespace.
	CheckBMCs(ctx context.Context, p *plan.Plan, wait time.Duration) error
}

// Daemon is a running process of a lab.
type Daemon struct {
	PID  int
	Args []string // argv without argv[0]
}
