// Package steps holds the steps every install mode shares, each an action
// of the engine (internal/lab): preflight (the host can carry the plan,
// the installer files pass the installer's rules, nothing the plan names
// is someone else's; a mode adds its rules through Preflight's hooks), the
// hosts step of a lab over several hosts (labctl run there through its
// exec:, checked through libvirt), network, storage (the pool, the nodes'
// volumes, an image downloaded once), nodes, bmcs (the BMC credentials,
// the lab's CA and its certificate for vbmcd, vbmcd itself), and what the
// modes' own steps share: the installer's inputs, the adapter from the
// plan to install-config generation (IPICluster, IPINodes, BondConfig;
// InstallCluster adds the lab's CA), and the lab's picture (Graph).
//
// The network step is the one owner of the host network: CheckNetwork,
// EnsureNetwork and RemoveNetwork are what `labctl net check|repair|down`
// print, and what up and down run. A lab on a shared network
// (network.shared) adds its entries to it there, and its down removes the
// entries the network lists as the lab's, found without the lab file;
// preflight checks its addresses, MACs and names against every other lab's
// on that network (sharedClashes). The host resolver's drop-in
// (network.hostResolver: dnsmasq or resolved) is one of the network's
// objects: checked, written back and removed with the rest; so is the
// lab's LLDP sender (network.lldp), a process that sends every running
// node NIC's tap its port's LLDP frames: net check reports it stopped,
// repair starts it, down stops it first.
//
// Storage: a pool whose directory is gone has lost its mark (a file in the
// directory); it is removed when its name is the plan's pool name and its
// directory had the lab's layout (…/.bmlab/disks): undefining it loses
// nothing, since its volumes were files in that directory. Any other pool
// is reported and left alone.
//
// What it does not do: know a mode (the hooks are the modes'), or reach
// the platform other than through the provider.
package steps
