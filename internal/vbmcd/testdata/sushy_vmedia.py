"""Virtual media steps, made with sushy as Ironic's redfish-virtual-media
boot interface makes them (the system's manager, its VirtualMedia member
that takes a CD).

Usage: sushy_vmedia.py URL USER PASSWORD SYSTEM_UUID STEP [ARG...]
Steps:
  insert IMAGE   insert_media(IMAGE) into the CD member
  eject          eject_media() of the CD member
  show           print the CD member
Prints one JSON object; exits non-zero on failure.
"""
import json
import sys

import sushy

from sushy_common import connect

root, step, args, path = connect()
system = root.get_system(path)
manager = system.managers[0]
cd = None
for member in manager.virtual_media.get_members():
    if sushy.VirtualMediaType.CD in member.media_types:
        cd = member
        break
if cd is None:
    print("no CD virtual media member")
    sys.exit(1)

if step == "insert":
    cd.insert_media(args[0], inserted=True, write_protected=True)
elif step == "eject":
    cd.eject_media()
elif step != "show":
    print("unknown step " + step)
    sys.exit(2)

cd.refresh()
print(json.dumps({
    "inserted": bool(cd.inserted),
    "image": cd.image,
    "connected_via": getattr(cd.connected_via, "value", cd.connected_via),
    "oem": cd.json.get("Oem", {}).get("Bmlab", {}),
    "status": cd.json.get("Status", {}),
}))
