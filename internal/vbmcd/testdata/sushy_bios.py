"""One step of a BIOS flow, made with sushy's bios API as Ironic's redfish
bios interface makes it (apply_configuration, factory_reset, the registry).

Usage: sushy_bios.py URL USER PASSWORD SYSTEM_UUID STEP [ARG...]
Steps:
  show                 print the BIOS state
  set NAME=VALUE ...   bios.set_attributes (a value that parses as JSON is
                       sent as that: 5, true; else as a string)
  factory-reset        bios.reset_bios
Prints one JSON object: current and pending attributes, supported apply
times, the registry's entries and, for a refused change, the HTTP status and
the Base message IDs; exits non-zero on any other failure.
"""
import json
import sys

import sushy

import sushy_common

root, step, args, system_path = sushy_common.connect()
system = root.get_system(system_path)
bios = system.bios
out = {}

if step == "set":
    attrs = {}
    for a in args:
        k, v = a.split("=", 1)
        try:
            attrs[k] = json.loads(v)
        except ValueError:
            attrs[k] = v
    try:
        bios.set_attributes(attrs)
    except sushy.exceptions.HTTPError as e:
        info = (e.body or {}).get("@Message.ExtendedInfo", [])
        out["status"] = e.status_code
        out["messages"] = [m.get("MessageId", "") for m in info]
elif step == "factory-reset":
    bios.reset_bios()
elif step != "show":
    print("unknown step " + step)
    sys.exit(2)

bios.refresh()
registry = bios.get_attribute_registry()
entries = {}
if registry is not None:
    for e in registry.registry_entries.attributes:
        entries[e.name] = {
            "type": e.attribute_type,
            "read_only": e.read_only,
            "reset_required": e.reset_required,
            "values": [v["ValueName"] for v in (e.allowable_values or [])],
        }
out.update({
    "current": bios.attributes,
    "pending": bios.pending_attributes,
    "apply_times": [getattr(t, "value", t)
                    for t in bios.supported_apply_times or []],
    "registry": entries,
})
print(json.dumps(out))
