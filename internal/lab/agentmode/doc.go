// Package agentmode is the agent install mode: OpenShift's agent-based
// installer, as on real servers. The nodes and their BMCs are made by the
// steps every mode shares; then install-config and agent-config from the
// plan, `openshift-install agent create image`, every node booted from the
// ISO through its BMC's virtual media (labctl serves the ISO on the lab
// network while each BMC fetches it: InsertMedia, a Once boot override to
// the CD, On, all through vbmcd's Redfish), the installer's waits, and the
// ISO ejected. add-node (AddWorkers) adds workers on day 2 the same way,
// with the ISO the running cluster makes (`oc adm node-image`).
//
// Cluster is the adapter from the plan to agent-config generation.
//
// What it does not do: generate agent-config itself (internal/agent) or
// speak Redfish itself (internal/lab/bmcclient).
package agentmode
