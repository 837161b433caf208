"""Reads one machine's own BMC (a listener of its own) with python3-sushy,
as Ironic's redfish driver does, and checks that it names its System,
Manager and Chassis with the vendor's ids and nowhere with the machine's.

Usage: sushy_vendor_ids.py URL CA USER PASSWORD UUID SYSTEM MANAGER CHASSIS MEDIA_AT MEMBER IMAGE_URL [proliantutils]
MEDIA_AT is "manager" or "system"; MEMBER the member to insert into. With
"proliantutils", HPE's library (Ironic's ilo and HPE redfish paths) reads
the BMC as well: it addresses /redfish/v1/Systems/1 and /Managers/1 itself.
Prints one line per check; exits non-zero on the first failure.
"""
import json
import sys

import sushy
from sushy.resources.chassis import chassis as sushy_chassis
from sushy.resources.manager import virtual_media

from checks import check

url, ca, user, password, uuid, sys_id, mgr_id, ch_id, media_at, member, image = sys.argv[1:12]
hpe = len(sys.argv) > 12 and sys.argv[12] == "proliantutils"


def no_machine_id(what, body):
    """The machine id may be the System's UUID property, nothing else
    (a generic BMC names its resources by the machine id)."""
    if sys_id == uuid:
        return
    body = dict(body)
    body.pop("UUID", None)
    check(what + " names no machine id", uuid in json.dumps(body), False)


root = sushy.Sushy(url + "/redfish/v1", verify=ca,
                   auth=sushy.auth.SessionOrBasicAuth(user, password))
check("systems", root.get_system_collection().members_identities,
      ("/redfish/v1/Systems/" + sys_id,))
# Ironic gives no system id for a BMC of one system: sushy takes the only one.
system = root.get_system()
check("system id", system.identity, sys_id)
check("system path", system.path, "/redfish/v1/Systems/" + sys_id)
check("system uuid property", system.uuid, uuid)
no_machine_id("system", system.json)
mgr = system.managers[0]
check("manager id", mgr.identity, mgr_id)
check("manager path", mgr.path, "/redfish/v1/Managers/" + mgr_id)
no_machine_id("manager", mgr.json)
ch_path = system.json["Links"]["Chassis"][0]["@odata.id"]
check("chassis link", ch_path, "/redfish/v1/Chassis/" + ch_id)
ch = sushy_chassis.Chassis(root._conn, ch_path, redfish_version=root.redfish_version)
check("chassis id", ch.identity, ch_id)
no_machine_id("chassis", ch.json)

# A change addressed by the vendor's path reaches the machine.
system.reset_system(sushy.RESET_ON)
system.refresh()
check("power on at " + system.path, system.power_state, sushy.SYSTEM_POWER_STATE_ON)
system.set_system_boot_options(sushy.BOOT_SOURCE_TARGET_PXE, sushy.BOOT_SOURCE_ENABLED_ONCE)
system.refresh()
check("boot override", system.boot.target, sushy.BOOT_SOURCE_TARGET_PXE)

base = mgr.path if media_at == "manager" else system.path
vm = virtual_media.VirtualMedia(root._conn, base + "/VirtualMedia/" + member,
                                redfish_version=root.redfish_version)
check("media path", vm.path, base + "/VirtualMedia/" + member)
no_machine_id("media", vm.json)
vm.insert_media(image, inserted=True, write_protected=True)
vm.refresh()
check("inserted at " + vm.path, (vm.image, vm.inserted), (image, True))
vm.eject_media()
vm.refresh()
check("ejected", vm.inserted, False)

if hpe:
    from proliantutils.redfish import redfish as hpe_redfish

    ops = hpe_redfish.RedfishOperations(url.removeprefix("https://"), user, password, cacert=ca)
    check("proliantutils product name", ops.get_product_name(), system.json["Model"])
    check("proliantutils power", ops.get_host_power_status(), "ON")
    ops.insert_virtual_media(image, "CDROM")
    vm.refresh()
    check("proliantutils inserted at " + vm.path, (vm.image, vm.inserted), (image, True))
    ops.eject_virtual_media("CDROM")
    vm.refresh()
    check("proliantutils ejected", vm.inserted, False)
print("DONE")
