// Package ironictest runs OpenStack Ironic for the project's tests, either
// release (Options.Release):
//   - Ironic 21.4, Debian 12's (ironic-api and ironic-conductor 1:21.4.4,
//     python3-sushy 4.3.3), installed on the host by hack/install-deps.sh;
//   - Ironic 29.0.5, Debian 13's (python3-sushy 5.5.0), from the trixie
//     root hack/build-ironic-root.sh builds into the tool cache
//     (_out/tools/ironic-29/root), run in a private mount namespace whose /
//     is that root, read-only, with the host's /tmp, /dev and /sys mounted
//     in (release.go): the test's files are at the same paths inside.
//
// API and conductor run as one process, `ironic`, with rpc_transport none,
// as Metal3's image runs them, with sqlite and no authentication (noauth),
// their configuration written by Start, on loopback or in a network
// namespace the test names. A test then enrolls nodes against vbmcd's BMCs
// and drives them through Ironic's REST API (client.go): manage, inspect,
// provide, deploy, undeploy, clean; Wait fails a test with the step, the
// node's states and Ironic's last_error; a failed test's log and database
// are kept in _out/ironic/.
//
// The deploy ramdisk nodes that are VMs boot is the real agent:
// ironic-python-agent 10.2.0 and Linux 6.12 from Debian 13's packages,
// built by hack/build-ipa-ramdisk.sh (ramdisk.go: DeployRamdisk,
// ServeRamdisk gives the driver_info that boots it, AgentConfig the
// configuration of fast_track and of the agent's power-off). Ironic puts the
// agent's URL on its kernel command line (a UEFI ISO it builds for
// redfish-virtual-media, with the ramdisk's ESP as bootloader; iPXE's
// configuration for the ipxe boot interface); the agent inspects (Ironic 29's
// agent inspect interface: inventory, LLDP), cleans and writes images onto
// the VM's disk, which the test then reads from the host (disk.go: a
// partition table, or none; the OS image's partitions byte for byte).
//
// Simulated machines cannot run an agent: Agent (agent.go) stands in for
// it there. It speaks the agent's side of Ironic's protocol (lookup,
// heartbeat, the commands API Ironic calls back) as Metal3's fake-ipa does,
// once told a machine booted the deploy image: vbmcd's event says its
// one-time Cd boot was used (WatchEvents), or, as in a Metal3 scale job, a
// listener of the fake driver's announcements deciding as fake-ipa does
// calls Booted and PoweredOff. It writes nothing to disks: the deploy and
// clean steps it is asked to run succeed at once.
//
// What the packages lack is supplied without touching Debian's files:
// python3-sushy (4.3.3 and 5.5.0 alike) ships without
// sushy/standard_registries/, which sushy lists (relative to its own package
// directory) whenever it reads a task monitor or a message, so every
// firmware update Ironic polls died with FileNotFoundError. Start makes an
// overlay of the release's sushy package (links to Debian's files) with the
// directory filled from vbmcd's own message registries
// (redfish.MessageRegistries), not DMTF's published ones (no package
// registry this project reaches carries them), and puts it first on
// Ironic's PYTHONPATH. No setting of sushy names another directory. With
// Options.VendorOverlay (Ironic 29), the same directory also holds
// testenv.VendorOverlay: Debian 13's python3-sushy-oem-idrac 5.0.0-2,
// linked, with the three modules it imports and does not ship supplied
// empty, so the idrac hardware type loads Dell's manager extension.
//
// Ironic publishes the images it hands BMCs (the deploy ISO) under its
// http_root; Start serves that directory over HTTP (Ironic.HTTPURL), as
// Metal3's httpd does, and anything else a test puts in Ironic.Files.
//
// Nodes with the ipmi hardware type boot the deploy ramdisk over the
// network (the ipxe boot interface); Options.PXE runs what that needs on
// the nodes' network, as the IPI bootstrap VM and Metal3's ironic image
// do (pxe.go): Debian's dnsmasq, either the subnet's DHCP server or, where
// another one hands out the addresses (a labctl lab's machine network,
// libvirt's), a proxyDHCP server; TFTP of Debian's iPXE binaries
// (snponly.efi, undionly.kpxe) for PXE firmware (a qemu VM's NIC option
// ROM is iPXE already, so its boot skips TFTP); and for iPXE the boot
// script Ironic writes (http_url/boot.ipxe), which chains to the node's
// configuration, its deploy_kernel and deploy_ramdisk. The network boot is
// IPv4 only; with PXE.RAPrefix dnsmasq also sends IPv6 router
// advertisements, without which iPXE waits about 16 s for a router before
// every boot.
//
// For many nodes (BenchmarkIronicNodes in internal/vbmcd, run by
// hack/ironic-bench.sh, takes hundreds of simulated servers through every
// step), one WatchEvents on vbmcd's service listener, or one notification
// listener, covers them all; raise Options.HeartbeatEvery (each running agent heartbeats that often
// besides the heartbeat after each command, which is what moves a step on)
// and, if the log grows too large, set Options.Config's DEFAULT debug to
// false. Ironic's warnings and errors are logged with the test
// (Ironic.Problems); its whole log, and http.log (each request to its
// HTTP server: what BMCs and network-booting nodes fetched), are in
// Ironic.Dir.
//
// Known limits of the clients, not of the harness: sushy 4.3 reads a
// system's memory as whole GiB, so Redfish inspection of a machine with
// less than 1 GiB finds none and fails; ironic-python-agent takes no disk
// smaller than 4 GiB for a root device.
//
// What it does not do: start vbmcd, libvirt or VMs (the test does), a
// network boot over IPv6 (DHCPv6, UEFI's PXEv6 or HTTP boot), Ironic's
// own DHCP providers (neutron, dnsmasq per node), or inspection through
// ironic-inspector (Ironic 21.4 inspects out of band only, by Redfish).
package ironictest
