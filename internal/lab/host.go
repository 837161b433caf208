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

// Provider is the platform a lab is built on, in the manner of kind's
// providers: the actions reach it through a few small interfaces, one per
// concern, so that another platform (a KubeVirt cluster) is new files, not
// edits across the actions. The real one is libvirt, netlink and processes
// on one host (RealHost) or several (MultiHost); the unit tests' is a fake.
type Provider interface {
	Objects() Objects
	Nodes() Nodes
	Storage() Storage
	Networks() Networks
	BMCs() BMCs
}

// Objects finds what bears a lab's mark, and removes it. Delete treats
// "absent" as success and refuses (ErrForeign) an object that does not
// bear the lab's mark.
type Objects interface {
	// Owner says whether the object exists and whose mark it bears ("" for
	// none: foreign).
	Owner(ctx context.Context, kind Kind, name string) (found bool, owner string, err error)
	// Marked lists the objects of a kind that bear lab's mark.
	Marked(ctx context.Context, kind Kind, lab string) ([]string, error)
	// Delete removes an object of lab's.
	Delete(ctx context.Context, kind Kind, name, lab string) error
}

// Nodes are the lab's machines.
type Nodes interface {
	// DefineDomain defines a node, shut off.
	DefineDomain(ctx context.Context, spec labvirt.DomainSpec) error
	// DomainMarks are the marks' attributes of every marked domain, by
	// domain, whichever lab's.
	DomainMarks(ctx context.Context) (map[string]map[string]string, error)
	// Start starts a node (false when it runs already).
	Start(ctx context.Context, name string) (bool, error)
	// Power is a node's power state (On, Off, ..., absent).
	Power(ctx context.Context, name string) (string, error)
	// SetNodeBMC records a node's IPMI port (0: none) and its own BMC user
	// (empty: none) with it, where its BMC reads them, and reports whether
	// they changed.
	SetNodeBMC(ctx context.Context, name string, ipmiPort int, user, password string) (bool, error)
}

// Storage is the lab's pool and the nodes' volumes.
type Storage interface {
	EnsurePool(ctx context.Context, spec labvirt.PoolSpec) (bool, error)
	EnsureVolume(ctx context.Context, spec labvirt.VolumeSpec) (bool, error)
	// DanglingPools are pools whose directory is gone.
	DanglingPools(ctx context.Context) ([]labvirt.DanglingPool, error)
	DeleteDanglingPool(ctx context.Context, name string) error
}

// Networks are the lab's links and libvirt networks. Ensure methods report
// what they changed, one line each; Problems methods what differs.
type Networks interface {
	EnsureNAT(ctx context.Context, spec labvirt.LabNetworkSpec) (bool, error)
	// NATProblems is how the NAT network differs from spec (none: in sync).
	NATProblems(ctx context.Context, spec labvirt.LabNetworkSpec) ([]string, error)
	EnsureBridgeNetwork(ctx context.Context, spec labvirt.NetworkSpec) (bool, error)
	// BridgeNetworkProblems is how a bridge-named network differs from spec.
	BridgeNetworkProblems(ctx context.Context, spec labvirt.NetworkSpec) ([]string, error)
	// NetworkCIDRs are the addresses of every libvirt network, by name.
	NetworkCIDRs(ctx context.Context) (map[string][]netip.Prefix, error)
	// EnsureLinks makes the topology's links and returns the steps done.
	EnsureLinks(ctx context.Context, lab string, t netplumb.Topology) ([]string, error)
	// LinkDifferences is how the links differ from the topology.
	LinkDifferences(ctx context.Context, lab string, t netplumb.Topology) ([]netplumb.Difference, error)
	// EnsureShared adds the lab's entries to a network it shares with
	// others (never making, starting or restarting that network).
	EnsureShared(ctx context.Context, spec labvirt.SharedSpec) ([]string, error)
	// SharedProblems is how a shared network lacks the lab's entries.
	SharedProblems(ctx context.Context, spec labvirt.SharedSpec) ([]string, error)
	// SharedNetworks are every libvirt network with each lab's entries in
	// it, whichever lab's.
	SharedNetworks(ctx context.Context) ([]labvirt.SharedNetwork, error)
	// RemoveShared removes what a network lists as lab's (false: nothing).
	RemoveShared(ctx context.Context, network, lab string) (bool, error)
	// WaitAddress returns once addr on the link is usable: an IPv6
	// address is tentative (nothing can bind it) until duplicate address
	// detection has run on a link with a carrier.
	WaitAddress(ctx context.Context, link string, addr netip.Addr) error
}

// BMCs is the lab's BMC daemon (vbmcd).
type BMCs interface {
	// Daemons are the running processes marked as lab's.
	Daemons(ctx context.Context, lab string) ([]Daemon, error)
	StartDaemon(ctx context.Context, v plan.Vbmcd, netns string) (Daemon, error)
	StopDaemon(ctx context.Context, pid int) error
	// CheckBMCs waits until every node's BMC answers with its UUID at the
	// plan's address, reached from the lab's namespace; progress (may be
	// nil) hears how many answer.
	CheckBMCs(ctx context.Context, p *plan.Plan, wait time.Duration, progress func(string)) error
}

// Daemon is a running process of a lab.
type Daemon struct {
	PID  int
	Args []string // argv without argv[0]
}
