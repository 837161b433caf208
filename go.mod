module github.com/bmlab/bmlab

go 1.26.8

require (
	github.com/bougou/go-ipmi v0.9.0 // indirect
	github.com/coreos/ignition/v2 v2.24.0 // indirect
	github.com/digitalocean/go-libvirt v0.0.0-20260217163227-273eaa321819 // indirect
	github.com/google/go-cmp v0.7.0
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/spf13/cobra v1.10.2
	github.com/spf13/pflag v1.0.10 // indirect
	github.com/stmcginnis/gofish v0.23.0 // indirect
	github.com/vishvananda/netlink v1.3.1 // indirect
	github.com/vishvananda/netns v0.0.5 // indirect
	github.com/vmware/goipmi v0.0.0-20181114221114-2333cd82d702 // indirect
	go.uber.org/multierr v1.10.0 // indirect
	go.uber.org/zap v1.28.0
	golang.org/x/crypto v0.48.0 // indirect
	golang.org/x/sys v0.41.0 // indirect
	libvirt.org/go/libvirtxml v1.11010.0 // indirect
	sigs.k8s.io/yaml v1.4.0 // indirect
)
