// Package hpe is what HPE's iLO 6 serves besides Redfish that Ironic's ilo
// and ilo5 hardware types drive through proliantutils: RIBCL, iLO's XML
// scripting interface (POST /ribcl). proliantutils 2.16.3's IloClient
// reads the product name over RIBCL and sends every later call of a
// server whose model does not name "Gen10" (a Gen11, an iLO 6) to RIBCL,
// not to Redfish (proliantutils/ilo/client.py, _call_method); only a
// Gen10's calls go to Redfish.
//
// ribcl.go reads a RIBCL request (the login and its commands), runs each
// command against a Server and writes iLO's answer: one XML document per
// element, each with its RESPONSE (STATUS and MESSAGE), the data after it,
// as HPE's iLO scripting guide and proliantutils' ribcl_sample_outputs.py
// show. health.go is GET_EMBEDDED_HEALTH, from the machine's inventory.
// What is served and what is refused (with iLO's status and message):
// docs/personalities.md.
//
// The package holds no state and changes none: Server is how the face
// (internal/redfish, oem_hpe.go) lets a command act on the machine, through
// the machine model.
package hpe
