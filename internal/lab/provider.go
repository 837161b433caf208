package lab

import (
	"context"
	"errors"
	"io"
	"net/netip"
	"time"

	"github.com/bmlab/bmlab/internal/netaddr"
	"github.com/bmlab/bmlab/internal/netplumb"
	"github.com/bmlab/bmlab/internal/plan"
)

// Provider is the platform a lab is built on, in the manner of kind's
// providers: the steps declare the lab's objects in labctl's own terms
// (the plan's nodes, disks and networks, its BMC daemon) and the provider
// makes them its own way. The libvirt one (internal/labvirt) is libvirt,
// netlink and processes on one host or several; the unit tests' is a
// fake; another platform is another package.
//
// Everything is idempotent. Delete treats "absent" as success and refuses
// (ErrForeign) what does not bear the lab's mark; Ensure creates what is
// missing, corrects what differs and leaves the rest.
type Provider interface {
	// Owner says whether an object exists and whose mark it bears ("" for
	// none: foreign).
	Owner(ctx context.Context, kind Kind, name string) (found bool, owner string, err error)
	// Marked lists the objects of a kind that bear lab's mark.
	Marked(ctx context.Context, kind Kind, lab string) ([]string, error)
	// Delete removes an object of lab's.
	Delete(ctx context.Context, kind Kind, name, lab string) error

	// Validate says what the platform would refuse in an object, before
	// anything is made (nil: nothing).
	Validate(o Object) error
	// Ensure makes an object as declared and says what it changed, one
	// line each (none: nothing to do).
	Ensure(ctx context.Context, o Object) ([]string, error)
	// Differences says how an object differs from its declaration (none:
	// in sync). It changes nothing.
	Differences(ctx context.Context, o Object) ([]Difference, error)

	// Power is a node's power state (On, Off, ..., absent); Start powers
	// it on (false: it runs already).
	Power(ctx context.Context, node string) (string, error)
	Start(ctx context.Context, node string) (bool, error)

	// Survey is what the platform holds besides the lab, whichever lab's
	// or none's: the parts of kinds (KindNetwork, KindDomain, KindPool;
	// none: all).
	Survey(ctx context.Context, kinds ...Kind) (*Survey, error)

	// Info is what the lab's host offers (as kind asks its provider,
	// `docker info`): KVM or not, its architecture, CPUs and memory, and
	// the space free where the lab keeps its files (dir, which exists) and
	// whether its VMs can read them there.
	// The steps ask it; they read no /dev/kvm or /proc of their own.
	Info(ctx context.Context, dir string) (HostInfo, error)

	// Image is what a disk image the nodes' volumes are cloned from is
	// (qemu-img info, for the libvirt one): its format and virtual size.
	Image(ctx context.Context, path string) (ImageInfo, error)
	// Fetch downloads an image (cluster.image's URL) to path, where the
	// nodes' volumes and drives find it, once: a path that is there is
	// kept (false), and a partial download is never left at path. watch
	// wraps the download's body (its size, -1 when unknown), so that the
	// caller can tell how far it has come.
	Fetch(ctx context.Context, url, path string, watch func(body io.Reader, size int64) io.Reader) (bool, error)
}

// Changed is what a Provider's Ensure returns for an object it made in one
// step: what, when ok says it changed something (none otherwise), with
// err as it is.
func Changed(ok bool, err error, what string) ([]string, error) {
	if ok {
		return []string{what}, err
	}
	return nil, err
}

// ImageInfo is a disk image as its provider reads it.
type ImageInfo struct {
	Format      string // qcow2, raw, ...
	VirtualSize uint64 // bytes
}

// HostInfo is what a lab's host offers. A figure the host does not tell
// is zero (MemoryMiB, CPUs) or FreeKnown is false.
type HostInfo struct {
	KVM       bool
	Arch      string // the host's architecture as Go names it: amd64, arm64
	CPUs      int
	MemoryMiB uint
	// FreeGiB is the space free to an unprivileged user in dir's file
	// system.
	FreeGiB   uint64
	FreeKnown bool
	// Unreachable says why the platform's VMs cannot read files in dir
	// (for libvirt: qemu, which runs as an unprivileged user, cannot enter
	// every directory down to it); nil when they can.
	Unreachable error
}

// Kind is a kind of object a lab owns on its platform.
type Kind string

// The kinds of objects.
const (
	KindDomain  Kind = "domain"
	KindNetwork Kind = "libvirt network"
	KindPool    Kind = "storage pool"
	KindVolume  Kind = "volume" // named pool/volume
	KindLink    Kind = "link"
	// KindRule is a routing policy rule of the lab's (the BMC network's
	// routes), named as ip rule shows it.
	KindRule Kind = "routing rule"
	// KindDaemon is the lab's BMC daemon (vbmcd), a process named by its
	// PID.
	KindDaemon Kind = "vbmcd"
	// KindLLDP is the lab's LLDP sender (`vbmcd lldp`), a process named by
	// its PID.
	KindLLDP Kind = "LLDP sender"
	// KindDHCP is the lab's DHCP server on an Unmanaged provisioning
	// network (a dnsmasq), a process named by its PID.
	KindDHCP Kind = "provisioning DHCP server"
	// KindShared is the lab's entries in a network it shares, named by
	// the network.
	KindShared Kind = "shared network entries"
	// KindDanglingPool is a storage pool whose directory is gone, and the
	// mark in it: Delete undefines it once the caller has proven it the
	// lab's (by its name and its directory's layout).
	KindDanglingPool Kind = "storage pool without its directory"
	// KindUnmanaged is NetworkManager's unmanaged-devices snippet of a
	// lab (Unmanaged), named by its path; its name is its mark.
	KindUnmanaged Kind = "NetworkManager snippet"
	// KindResolver is a host resolver drop-in (ResolverDropIn), named by
	// its path; its first line is its mark.
	KindResolver Kind = "host resolver drop-in"
)

// ErrForeign means an object with a lab name does not bear the lab's mark.
var ErrForeign = errors.New("not the lab's")

// Object is what a step declares for the provider to make.
type Object interface{ object() }

// Pool is the lab's storage: a directory whose volumes are the nodes'
// disks.
type Pool struct{ Lab, Name, Dir string }

// Volume is one disk of a node, at least Capacity bytes large.
type Volume struct {
	Lab, Pool string
	Disk      plan.Disk
	Capacity  uint64
}

// Machine is a node: a UEFI machine, shut off when made, with its disks,
// its boot NIC on Network, an empty CD drive for virtual media and a
// serial log. Attrs are more attributes of its mark (pairs) that other
// labs read; CDROM, when set, is an ISO in its CD drive that it boots
// after its blank disk (no fw_cfg ignition then).
type Machine struct {
	Lab     string
	Node    plan.Node
	Network string
	Attrs   []string
	CDROM   string
}

// MachineBMC is what a node's BMC serves it with: its IPMI port (0: none),
// its own BMC user (empty: none) and the vendor BMC it looks like
// (Personality; empty: vbmcd's default).
type MachineBMC struct {
	Node           string
	IPMIPort       int
	User, Password string
	Personality    string
}

// NATNetwork is the lab's own NAT network: the machine network of every
// family, a DHCP reservation and DNS record per node, api and *.apps.
// NodeHoldsVIPs says those are a single node's own address.
type NATNetwork struct {
	Lab           string
	NAT           plan.NAT
	Nodes         []plan.Node
	NodeHoldsVIPs bool
}

// BridgeNetwork is a network named like a lab bridge, on that bridge (what
// the installer's bridge check accepts).
type BridgeNetwork struct{ Lab, Name string }

// SharedEntries are the lab's reservations and DNS records in a network
// it shares with others; Ensure never makes, starts or restarts that
// network.
type SharedEntries struct {
	Lab    string
	Shared plan.Shared
}

// Links are the lab's links on the host (bridges, veths, VXLAN).
type Links struct {
	Lab      string
	Topology netplumb.Topology
}

// LinkAddress is an address on a link; Ensure returns once it is usable
// (an IPv6 address is tentative until duplicate address detection has run
// on a link with a carrier).
type LinkAddress struct {
	Link string
	Addr netip.Addr
}

// BMCDaemon is the lab's BMC daemon as the plan describes it
// (plan.Vbmcd: what it serves, where it keeps its files; the provider
// builds its command line). Ensure starts it unless it runs as the plan's
// facts make it (Restart: its settings files
// changed, it must read them again), then waits up to Wait until every
// node's BMC answers with its UUID at the plan's address, telling Progress
// (may be nil) how many answer.
type BMCDaemon struct {
	Plan     *plan.Plan
	Restart  bool
	Wait     time.Duration
	Progress func(string)
}

// LLDPSender is the lab's switches on the wire: a process that sends
// every running node NIC's tap the LLDP frames of its port, in the lab's
// namespace, as the plan describes it (the provider builds its command
// line). Ensure starts it unless it runs as the plan's facts make it;
// Differences says when none runs.
type LLDPSender struct {
	Lab    string
	Netns  string
	Sender plan.LLDPSender
}

// DHCPServer is the DHCP server the lab runs on an Unmanaged provisioning
// network (the site's, which the installer leaves to the user), in the
// lab's namespace, as the plan invokes it. Ensure writes its configuration
// file and starts it unless one runs with the plan's arguments and that
// configuration (it restarts one whose configuration changed);
// Differences says when none runs, or its configuration is not the plan's.
type DHCPServer struct {
	Lab    string
	Netns  string
	Server plan.DHCPServer
}

// Unmanaged is NetworkManager's unmanaged-devices snippet that keeps it
// off the lab's links, on the host that holds them. Ensure writes it where
// NetworkManager is and says its path when it wrote; Differences gives one
// (Object: its path) when NetworkManager is there and the snippet is not,
// or differs.
type Unmanaged struct{ netplumb.Unmanaged }

// ResolverDropIn is the host resolver's drop-in that sends the cluster's
// domain to the lab's DNS. Ensure writes it unless it is there (a file
// without the lab's mark stops it: netplumb.ErrNotLabs) and says its path
// when it wrote; Differences gives one (Object: its path, Got: what is
// wrong, Blocking: a file without the lab's mark) unless it is as
// declared.
type ResolverDropIn struct{ netplumb.ResolverDropIn }

func (DHCPServer) object()     {}
func (Unmanaged) object()      {}
func (ResolverDropIn) object() {}

func (Pool) object()          {}
func (Volume) object()        {}
func (Machine) object()       {}
func (MachineBMC) object()    {}
func (NATNetwork) object()    {}
func (BridgeNetwork) object() {}
func (SharedEntries) object() {}
func (Links) object()         {}
func (LinkAddress) object()   {}
func (BMCDaemon) object()     {}
func (LLDPSender) object()    {}

// Difference is one way the platform differs from what the lab declares.
// It is also what `labctl net check -o json` prints: the contract between
// labctl on the lab's hub and on its other hosts.
type Difference struct {
	Object string `json:"object"`
	Kind   string `json:"kind"`
	Want   string `json:"want,omitempty"`
	Got    string `json:"got,omitempty"`
	// Blocking marks an object with a lab name that is not the lab's:
	// nothing repairs it, the user must clear it.
	Blocking bool   `json:"blocking,omitempty"`
	Fix      string `json:"fix"`
}

// Survey is what a platform holds besides one lab.
type Survey struct {
	// Addresses are every network's addresses (every family), by name.
	Addresses map[string][]netip.Prefix
	// Networks are every network as a lab that would join it sees it.
	Networks []SharedNetwork
	// Marks are the mark's attributes of every marked node, whichever
	// lab's, by node.
	Marks map[string]map[string]string
	// Dangling are storage pools whose directory is gone.
	Dangling []DanglingPool
}

// SharedNetwork is a network a lab could share: its bridge, IPv4
// addresses and DHCP ranges, the entries each lab that shares it added,
// the reservations and records no lab's list names (its owner's or the
// user's), and what its DHCP server has leased.
type SharedNetwork struct {
	Name    string
	Owner   string // the lab whose mark it bears, "" for none
	Bridge  string
	Active  bool
	CIDRs   []netip.Prefix
	Ranges  []netaddr.Range
	Labs    []Entries
	Hosts   []plan.Reservation
	Records []plan.Record
	Leases  []plan.Reservation
}

// Entries are what one lab added to a shared network: its block of
// addresses, its reservations and its DNS records.
type Entries struct {
	Lab     string
	Block   netaddr.Range
	Hosts   []plan.Reservation
	Records []plan.Record
}

// DanglingPool is a storage pool whose directory no longer exists.
type DanglingPool struct{ Name, Dir string }

// Spokes is implemented by the provider of a lab over several hosts:
// what each other host shows of the lab, for the hosts step to verify what
// labctl there made or removed.
type Spokes interface {
	HostView(ctx context.Context, host, lab, pool string) (HostView, error)
}

// HostView is what one host shows of the lab, without reading any file
// (its pool's directory is that host's).
type HostView struct {
	Domains  []string // bearing the lab's mark
	Networks []string // bearing the lab's mark
	Pool     PoolView
}

// PoolView is a storage pool as the platform alone shows it.
type PoolView struct {
	Found, Active bool
	Dir           string
	Volumes       []string
}

// Runner runs labctl on another host of the lab: `<exec> <labctl> args...`
// with the lab file on its standard input. It returns what the command
// printed on its standard output, also when it fails.
type Runner interface {
	Labctl(ctx context.Context, h plan.Host, stdin []byte, args ...string) ([]byte, error)
}
