"""Reads each machine's BMC with python3-sushy as Ironic's redfish driver
does, and checks that it shows the personality the test gave it.

Usage: sushy_personality.py URL USER PASSWORD IMAGE_URL < expectations.json
The expectations: a list of {uuid, manufacturer, model, bios, bmc_model,
bmc_firmware, oem, media_at ("manager" or "system"), members {id: [types]},
insert (the member to insert into)}.
Prints one line per check; exits non-zero on the first failure.
"""
import json
import sys

import sushy
from sushy import exceptions
from sushy.resources.manager import virtual_media

from checks import check

url, user, password, image = sys.argv[1:5]
want = json.load(sys.stdin)


root = sushy.Sushy(url + "/redfish/v1",
                   auth=sushy.auth.SessionOrBasicAuth(user, password))
for w in want:
    name = w["personality"]
    system = root.get_system("/redfish/v1/Systems/" + w["uuid"])
    # Ironic's RedfishManagement.detect_vendor reads this.
    check(name + " manufacturer", system.manufacturer, w["manufacturer"])
    check(name + " model", system.json["Model"], w["model"])
    check(name + " bios version", system.bios_version, w["bios"])
    check(name + " system oem vendors", sorted(system.oem_vendors or []), w["oem"])
    managers = system.managers
    check(name + " one manager", len(managers), 1)
    mgr = managers[0]
    check(name + " manager type", mgr.manager_type, sushy.ManagerType.BMC)
    check(name + " manager model", mgr.model, w["bmc_model"])
    # Ironic's redfish-virtual-media boot checks a Dell's major version.
    check(name + " manager firmware", mgr.firmware_version, w["bmc_firmware"])

    if w["media_at"] == "both":
        coll = mgr.virtual_media
        check(name + " System VirtualMedia link", "VirtualMedia" in system.json, True)
    elif w["media_at"] == "manager":
        coll = mgr.virtual_media
        try:
            system.json["VirtualMedia"]
            check(name + " no System VirtualMedia link", True, False)
        except KeyError:
            check(name + " no System VirtualMedia link", True, True)
    else:
        # sushy 4.3.3 reads virtual media at the Manager only: an iDRAC
        # 10 has none there, as Ironic's newer code expects.
        try:
            mgr.virtual_media
            check(name + " no Manager VirtualMedia", False, True)
        except exceptions.MissingAttributeError:
            check(name + " no Manager VirtualMedia", True, True)
        coll = virtual_media.VirtualMediaCollection(
            root._conn, system.json["VirtualMedia"]["@odata.id"],
            redfish_version=root.redfish_version)
    members = {m.identity: sorted(str(getattr(t, "value", t)) for t in m.media_types)
               for m in coll.get_members()}
    check(name + " members", members, {k: sorted(v) for k, v in w["members"].items()})

    cd = coll.get_member(coll.path + "/" + w["insert"])
    cd.insert_media(image)
    cd.refresh()
    check(name + " inserted", (cd.inserted, cd.image), (True, image))
    cd.eject_media()
    cd.refresh()
    check(name + " ejected", cd.inserted, False)
print("DONE")
