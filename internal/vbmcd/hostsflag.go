package vbmcd

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"

	"github.com/bmlab/bmlab/internal/virt"
)

// hostList is the libvirt hosts vbmcd serves, filled by two flags:
// --libvirt-uri [NAME=]URI (repeatable) and the config file's libvirt: list
// of {name, uri, domains} (the hidden flag --libvirt, one JSON object per
// Set). The first value given replaces the default qemu:///system.
type hostList struct {
	hosts   *[]virt.Host
	changed bool
}

func (h *hostList) add(x virt.Host) {
	if !h.changed {
		*h.hosts = nil
		h.changed = true
	}
	*h.hosts = append(*h.hosts, x)
}

// uriValue is --libvirt-uri.
type uriValue struct{ *hostList }

func (v uriValue) Type() string { return "[NAME=]URI" }

func (v uriValue) String() string {
	var s []string
	for _, x := range *v.hosts {
		if x.Name != "" {
			s = append(s, x.Name+"="+x.URI)
		} else {
			s = append(s, x.URI)
		}
	}
	return strings.Join(s, ",")
}

// Set takes NAME=URI or URI. A URI's own '=' (?socket=...) comes after its
// scheme's ':', so a name is what precedes an '=' that no ':' precedes.
func (v uriValue) Set(s string) error {
	x := virt.Host{URI: s}
	if i := strings.Index(s, "="); i > 0 && !strings.ContainsAny(s[:i], ":/?") {
		x.Name, x.URI = s[:i], s[i+1:]
	}
	if _, _, err := virt.DialerFor(x.URI); err != nil {
		return err
	}
	v.add(x)
	return nil
}

// hostValue is the config file's libvirt: entries.
type hostValue struct{ *hostList }

func (v hostValue) Type() string   { return "host" }
func (v hostValue) String() string { return "" }

func (v hostValue) Set(s string) error {
	var e struct {
		Name    string   `json:"name"`
		URI     string   `json:"uri"`
		Domains []string `json:"domains"`
	}
	if err := decodeStrict(s, &e); err != nil {
		return fmt.Errorf("libvirt host %s: %w (want name:, uri: and optional domains:)", s, err)
	}
	if e.URI == "" {
		return fmt.Errorf("libvirt host %s: uri is missing", s)
	}
	if _, _, err := virt.DialerFor(e.URI); err != nil {
		return err
	}
	v.add(virt.Host{Name: e.Name, URI: e.URI, Domains: e.Domains})
	return nil
}

// decodeStrict decodes the JSON object s (a flag's value, a config file's
// entry) into v, refusing a key v has no field for.
func decodeStrict(s string, v any) error {
	d := json.NewDecoder(strings.NewReader(s))
	d.DisallowUnknownFields()
	return d.Decode(v)
}

// libvirtHosts returns the hosts to serve, named: a host given without a
// name is named after its URI's host ("local" for a local socket) when
// there are several, and keeps no name when it is the only one.
func (c *Config) libvirtHosts() ([]virt.Host, error) {
	out := make([]virt.Host, len(c.Libvirt))
	seen := map[string]bool{}
	for i, h := range c.Libvirt {
		if h.Domains == nil {
			h.Domains = c.Domains
		}
		if h.Name == "" && len(c.Libvirt) > 1 {
			h.Name = "local"
			if u, err := url.Parse(h.URI); err == nil && u.Hostname() != "" {
				h.Name = u.Hostname()
			}
		}
		if len(c.Libvirt) > 1 && seen[h.Name] {
			return nil, fmt.Errorf("--libvirt-uri: two hosts are named %q; name them: --libvirt-uri NAME=URI", h.Name)
		}
		seen[h.Name] = true
		out[i] = h
	}
	return out, nil
}
