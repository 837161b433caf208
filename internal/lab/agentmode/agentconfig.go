package agentmode

import (
	"github.com/bmlab/bmlab/internal/agent"
	"github.com/bmlab/bmlab/internal/plan"
)

// Cluster is the plan's cluster as agent-config generation takes it.
func Cluster(p *plan.Plan) agent.Cluster {
	c := agent.Cluster{Name: p.Cluster.Name, Family: p.Cluster.Family, Secondary: p.Cluster.Secondary}
	if a := p.Agent; a != nil {
		c.RendezvousIP, c.StaticIPs = a.RendezvousIP, a.StaticIPs
	}
	for _, n := range p.Nodes {
		if !n.Added {
			h := agent.HostSpec{Name: n.Name, Role: n.Role, MAC: n.MAC, IP: n.IP, SecondaryIP: n.SecondaryIP, Bond: n.Bond}
			h.NICs, h.MACs = n.BondPorts()
			c.Hosts = append(c.Hosts, h)
		}
	}
	return c
}
