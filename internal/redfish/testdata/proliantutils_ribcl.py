"""An iLO 6 at a BMC of its own through Debian 13's proliantutils 2.16.3
(Ironic 29's ilo and ilo5 hardware types' library), as Ironic's ilo
drivers call it: IloClient reads the product name over RIBCL and, the model
being a Gen11 (not a Gen10), sends every later call to RIBCL too. Each
change is checked over Redfish as well (the same machine).

Usage: proliantutils_ribcl.py HOST PORT CA USER PASSWORD IMAGE
Prints DONE at the end.
"""
import sys

import requests
from proliantutils import exception
from proliantutils.ilo import client
from proliantutils.ilo import constants
from proliantutils.ilo import ribcl

host, port, ca, user, password, image = sys.argv[1:7]
port = int(port)
base = "https://%s:%d" % (host, port)


def check(cond, what):
    if not cond:
        raise SystemExit("FAIL: " + what)
    print("ok:", what)


def redfish(path):
    r = requests.get(base + path, auth=(user, password), verify=ca)
    r.raise_for_status()
    return r.json()


ilo = client.IloClient(host, user, password, 60, port, cacert=ca)
check(ilo.model == "ProLiant DL360 Gen11", "the model read over RIBCL: %s" % ilo.model)
check(not hasattr(ilo, 'redfish'), "a Gen11 gets no Redfish object: RIBCL serves it")

# Power, as Ironic's ilo power interface: on, graceful press, hold off.
check(ilo.get_host_power_status() == "OFF", "off at first")
ilo.set_host_power("ON")
check(ilo.get_host_power_status() == "ON", "on after SET_HOST_POWER Yes")
check(redfish("/redfish/v1/Systems/1")["PowerState"] == "On", "on over Redfish too")
ilo.hold_pwr_btn()
check(ilo.get_host_power_status() == "OFF", "off after HOLD_PWR_BTN")
ilo.reset_server()
check(ilo.get_host_power_status() == "ON", "RESET_SERVER of an off server starts it")
ilo.hold_pwr_btn()

# Boot modes (ilo_common.set_boot_mode, update_boot_mode).
check(ilo.get_current_boot_mode() == "UEFI", "current boot mode UEFI")
check(ilo.get_supported_boot_mode() == constants.SUPPORTED_BOOT_MODE_LEGACY_BIOS_AND_UEFI, "supported: %s" % ilo.get_supported_boot_mode())
ilo.set_pending_boot_mode("LEGACY")
check(ilo.get_pending_boot_mode() == "LEGACY", "pending LEGACY")
pending = redfish("/redfish/v1/Systems/1/Bios/Settings")["Attributes"]
check(pending.get("BootMode") == "Bios", "the pending mode is the BIOS setting Redfish shows: %s" % pending)
ilo.set_pending_boot_mode("UEFI")
check(ilo.get_pending_boot_mode() == "UEFI", "pending UEFI again")

# One-time boot (IloManagement.set_boot_device, not persistent).
check(ilo.get_one_time_boot() == "Normal", "no one-time boot at first")
ilo.set_one_time_boot("CDROM")
check(ilo.get_one_time_boot() == "CDROM", "one-time CDROM")
boot = redfish("/redfish/v1/Systems/1")["Boot"]
check(boot["BootSourceOverrideTarget"] == "Cd" and boot["BootSourceOverrideEnabled"] == "Once",
      "Redfish shows the override: %s" % boot)

# Persistent boot (update_persistent_boot, get_persistent_boot_device).
check(ilo.get_persistent_boot_device() == "HDD", "persistent boot HDD first")
ilo.update_persistent_boot(["NETWORK"])
check(ilo.get_persistent_boot_device() == "NETWORK", "persistent boot NETWORK first")
order = redfish("/redfish/v1/Systems/1")["Boot"]["BootOrder"]
check(order[0].startswith("Pxe-"), "Redfish's BootOrder starts with PXE: %s" % order)
ilo.update_persistent_boot(["CDROM"])
check(ilo.get_persistent_boot_device() == "CDROM", "persistent boot CDROM first")
ilo.update_persistent_boot(["HDD"])
check(ilo.get_persistent_boot_device() == "HDD", "persistent boot HDD first again")

# Virtual media (ilo_common.attach_vmedia, eject_vmedia_devices).
for device, member in [("CDROM", "2"), ("FLOPPY", "1")]:
    ilo.insert_virtual_media(image, device=device)
    ilo.set_vm_status(device=device, boot_option="CONNECT", write_protect="YES")
    st = ilo.get_vm_status(device)
    check(st["IMAGE_INSERTED"] == "YES" and st["IMAGE_URL"] == image, "%s inserted: %s" % (device, st))
    vm = redfish("/redfish/v1/Managers/1/VirtualMedia/" + member)
    check(vm["Inserted"] and vm["Image"] == image, "Redfish's member %s has it" % member)
    ilo.eject_virtual_media(device)
    check(ilo.get_vm_status(device)["IMAGE_INSERTED"] == "NO", "%s ejected" % device)
ilo.eject_virtual_media("CDROM")  # nothing in it: proliantutils does not ask
ilo.insert_virtual_media(image, device="CDROM")
ilo.set_vm_status(device="CDROM", boot_option="BOOT_ONCE", write_protect="YES")
check(ilo.get_one_time_boot() == "CDROM", "BOOT_ONCE makes the CD the one-time boot")
ilo.eject_virtual_media("CDROM")
try:
    ilo.set_vm_status(device="CDROM", boot_option="BOOT_ONCE", write_protect="NO")
except exception.IloError as e:
    check("invalid Virtual Media option" in str(e), "a writable virtual CD is refused: %s" % e)
else:
    raise SystemExit("FAIL: write_protect NO was taken")

# Secure boot: RIBCL has none; proliantutils says so (Ironic's ilo boot then
# treats secure boot as unsupported).
try:
    ilo.get_secure_boot_mode()
except exception.IloCommandNotSupportedError as e:
    check(True, "secure boot is not a RIBCL command: %s" % e)
else:
    raise SystemExit("FAIL: get_secure_boot_mode answered over RIBCL")

# Inspection (IloInspect: essential properties and capabilities).
props = ilo.get_essential_properties()
print("essential properties:", props)
p = props["properties"]
check(p["memory_mb"] > 0 and p["cpus"] > 0 and p["cpu_arch"] == "x86_64" and p["local_gb"] >= 0,
      "memory, CPUs, arch, disk")
check(len(props["macs"]) >= 1, "the NICs' MACs: %s" % props["macs"])
# IloClient.get_server_capabilities then asks IPMI (ipmitool fru print) for
# the NICs' capacity of a server that is not a Gen10; this BMC serves no
# IPMI here, so the test reads the RIBCL part, which Ironic's ilo
# inspection gets from it.
caps = ilo.ribcl.get_server_capabilities()
print("capabilities:", caps)
check(caps["server_model"] == "ProLiant DL360 Gen11" and caps["boot_mode_uefi"] == "true"
      and caps["ilo_firmware_version"].startswith("iLO 6"), "capabilities")

# A wrong password: iLO's Login failed.
try:
    ribcl.RIBCLOperations(host, user, password + "x", 60, port, cacert=ca).get_product_name()
except exception.IloLoginFailError as e:
    check("Login failed" in str(e), "a wrong password: %s" % e)
else:
    raise SystemExit("FAIL: a wrong password was taken")
print("DONE")
