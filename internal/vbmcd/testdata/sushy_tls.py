"""Connects to a BMC as Ironic does with a CA to verify it (OpenShift's
bmcVerifyCA becomes the node's redfish_verify_ca, which sushy gets as
verify=<CA file>; here through SUSHY_VERIFY) and lists the systems.

Usage: SUSHY_VERIFY=CA_FILE sushy_tls.py URL USER PASSWORD - systems
Prints one JSON object: {"systems": N} or {"error": "..."}.
"""
import json

import sushy

import sushy_common

try:
    root, _, _, _ = sushy_common.connect()
    print(json.dumps(
        {"systems": len(root.get_system_collection().members_identities)}))
except sushy.exceptions.ConnectionError as e:
    print(json.dumps({"error": str(e)}))
