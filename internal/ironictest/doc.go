// Package ironictest runs OpenStack Ironic for the project's tests: the
// Ironic 21.4 Debian 12 ships (the ironic-api and ironic-conductor packages;
// the API and the conductor run as one process, `ironic`, with
// rpc_transport none, as Metal3's image runs them), with sqlite and no
// authentication (noauth), its configuration written by Start, on loopback
// or in a network namespace the test names. A test then enrolls nodes
// against vbmcd's BMCs and drives them through Ironic's REST API (client.go):
// manage, inspect, provide, deploy, undeploy, clean; Wait fails a test with
// the step, the node's states and Ironic's last_error.
//
// Two things the packages lack are supplied without touching Debian's
// files:
//   - python3-sushy 4.3.3 ships without sushy/standard_registries/, which
//     sushy lists (pkg_resources, relative to its own package directory)
//     whenever it reads a task monitor or a message, so every firmware
//     update Ironic polls died with FileNotFoundError. Start makes an
//     overlay of the sushy package (links to Debian's files) with the
//     directory filled from vbmcd's own message registries
//     (redfish.MessageRegistries), and puts it first on Ironic's
//     PYTHONPATH. No setting of sushy names another directory.
//   - ironic-python-agent, which runs in the deploy ramdisk. Agent (agent.go)
//     stands in for it: it speaks the agent's side of Ironic's protocol
//     (lookup, heartbeat, the commands API Ironic calls back) as Metal3's
//     fake-ipa does, once told a node booted the deploy image: for a VM, its
//     serial console shows the line the deploy image prints (the marker ISO, or
//     the marker EFI kernel iPXE boots: WatchSerial); for a
//     simulated machine, vbmcd's event says its one-time Cd boot was used
//     (WatchEvents); or, as in a Metal3 scale job, a listener of the fake
//     driver's announcements deciding as fake-ipa does calls Booted and
//     PoweredOff. It writes nothing to disks: the deploy and clean steps
//     it is asked to run succeed at once.
//
// Ironic publishes the images it hands BMCs (the deploy ISO) under its
// http_root; Start serves that directory over HTTP (Ironic.HTTPURL), as
// Metal3's httpd does, and anything else a test puts in Ironic.Files.
//
// Nodes with the ipmi hardware type boot the deploy ramdisk over the
// network (the ipxe boot interface); Options.PXE runs what that needs on
// the nodes' network, as the IPI bootstrap VM and Metal3's ironic image
// do: Debian's dnsmasq, either with the configuration Metal3's ironic-image
// writes (metal3.go: its dnsmasq.conf.j2's lines in their order, as the
// DHCP server of a range, or TFTP only beside another DHCP server, in IPv4
// or IPv6, the DHCPv6 section as it is or as it was: Metal3DHCPv6*), or,
// where another server hands out the addresses (a labctl lab's machine
// network, libvirt's), the harness's own proxyDHCP server (pxe.go); TFTP
// of Debian's iPXE binaries (snponly.efi, also as snponly-x86_64.efi,
// undionly.kpxe) for PXE firmware (a qemu VM's NIC option ROM is iPXE
// already, so its IPv4 boot skips TFTP); and for iPXE the boot script
// Ironic writes (http_url/boot.ipxe), which chains to the node's
// configuration, its deploy_kernel and deploy_ramdisk. Options.HTTPPort
// puts Ironic's HTTP server where a DHCP server sends iPXE (Metal3's
// 6180). A VM's UEFI deploy kernel can be testenv.AgentEFI, which prints
// the agent's marker WatchSerial waits for. With PXE.RAPrefix on an IPv4
// network dnsmasq also sends IPv6 router advertisements, without which
// iPXE waits about 16 s for a router before every boot.
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
// less than 1 GiB finds none and fails.
//
// What it does not do: start vbmcd, libvirt or VMs (the test does), UEFI
// HTTP boot, Ironic's own DHCP providers (neutron, dnsmasq per node), or
// inspection through ironic-inspector.
package ironictest
