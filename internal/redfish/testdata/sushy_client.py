"""Drives the Redfish service with sushy, the library Ironic uses.

Usage: sushy_client.py URL USER PASSWORD SYSTEM_UUID SYSTEM_NAME
Prints one line per step; exits non-zero on the first failure.
"""
import sys

import requests
import sushy

from checks import check

url, user, password, uuid, name = sys.argv[1:6]


for label, auth in (("basic", sushy.auth.BasicAuth(user, password)),
                    ("session", sushy.auth.SessionAuth(user, password))):
    root = sushy.Sushy(url + "/redfish/v1", auth=auth)
    members = root.get_system_collection().members_identities
    check(label + " systems listed", ("/redfish/v1/Systems/" + uuid) in members, True)
    system = root.get_system("/redfish/v1/Systems/" + uuid)
    check(label + " uuid", system.uuid, uuid)
    check(label + " name", system.name, name)

    # Ironic's boot-device dance: mode, then target Once; then power on.
    system.set_system_boot_options(
        target=sushy.BootSource.PXE,
        enabled=sushy.BootSourceOverrideEnabled.ONCE,
        mode=sushy.BootSourceOverrideMode.UEFI)
    system.refresh()
    check(label + " boot target", system.boot.target, sushy.BootSource.PXE)
    check(label + " boot enabled", system.boot.enabled, sushy.BootSourceOverrideEnabled.ONCE)
    check(label + " boot mode", system.boot.mode, sushy.BootSourceOverrideMode.UEFI)
    check(label + " allowed targets include Cd",
          "Cd" in [getattr(v, "value", v) for v in system.boot.allowed_values], True)

    system.reset_system(sushy.ResetType.ON)
    system.refresh()
    check(label + " power on", system.power_state, sushy.PowerState.ON)
    # Sensor data as Ironic collects it: the machine model's sensors, the
    # values `ipmitool sdr` shows for the same machine.
    chassis = root.get_chassis("/redfish/v1/Chassis/" + uuid)
    temps = {t.name: t.reading_celsius for t in chassis.thermal.temperatures}
    check(label + " CPU temperature", temps.get("CPU Temp"), 45)
    check(label + " fan RPM", [f.reading for f in chassis.thermal.fans], [4800])
    check(label + " power drawn", chassis.power.power_supplies[0].last_power_output_watts, 180)
    check(label + " Once spent by the boot", system.boot.enabled,
          sushy.BootSourceOverrideEnabled.DISABLED)

    # The older call Ironic still uses.
    system.set_system_boot_source(sushy.BootSource.CD,
                                  enabled=sushy.BootSourceOverrideEnabled.CONTINUOUS)
    system.refresh()
    check(label + " continuous target", system.boot.target, sushy.BootSource.CD)

    # BIOS: pending until the next reset.
    bios = system.bios
    bios.set_attributes({"ProcTurboMode": "Disabled"})
    bios.refresh()
    check(label + " bios pending", bios.pending_attributes.get("ProcTurboMode"), "Disabled")
    check(label + " bios current unchanged", bios.attributes.get("ProcTurboMode"), "Enabled")
    system.reset_system(sushy.ResetType.FORCE_RESTART)
    system.bios.refresh()
    check(label + " bios applied by reset", system.bios.attributes.get("ProcTurboMode"), "Disabled")
    system.bios.reset_bios()
    system.reset_system(sushy.ResetType.FORCE_RESTART)
    system.bios.refresh()
    check(label + " bios defaults after ResetBios", system.bios.attributes.get("ProcTurboMode"), "Enabled")

    # Secure boot: requested now, in effect at the next start.
    sb = system.secure_boot
    sb.set_enabled(True)
    sb.refresh()
    check(label + " secure boot enabled", sb.enabled, True)
    sb.set_enabled(False)

    # Inventory Ironic's inspection reads.
    check(label + " memory GiB", system.memory_summary.size_gib, 8)
    check(label + " cpus", system.processors.summary[0], 4)
    macs = [n.mac_address for n in system.ethernet_interfaces.get_members()]
    check(label + " one MAC", len(macs), 1)
    check(label + " largest disk", system.simple_storage.max_size_bytes, 120 << 30)
    # The disks are drives; the CD-ROM is the Manager's virtual media.
    stor = system.storage.get_members()
    check(label + " drives", sorted(d.identity for s in stor for d in s.drives), ["vda"])
    check(label + " drive media", [d.media_type for s in stor for d in s.drives], ["HDD"])
    check(label + " storage controllers", [c.member_id for s in stor for c in s.storage_controllers], ["0"])
    check(label + " controllers", [c.identity for s in stor for c in s.controllers.get_members()], ["0"])
    check(label + " volumes", [len(s.volumes.get_members()) for s in stor], [0])

    # The service root's Tasks link (ServiceRoot v1_0_0): sushy follows it
    # to watch firmware updates and other long operations.
    check(label + " task service", root.get_task_service().path, "/redfish/v1/TaskService")

    manager = root.get_manager("/redfish/v1/Managers/" + uuid)
    check(label + " manager type", manager.manager_type, sushy.ManagerType.BMC)

    system.reset_system(sushy.ResetType.FORCE_OFF)
    system.refresh()
    check(label + " power off", system.power_state, sushy.PowerState.OFF)

    # An unknown reset type is refused by the service, not only by sushy.
    try:
        root._conn.post("/redfish/v1/Systems/" + uuid + "/Actions/ComputerSystem.Reset",
                        data={"ResetType": "Explode"})
        check(label + " bad reset refused", "accepted", "refused")
    except sushy.exceptions.BadRequestError as e:
        check(label + " bad reset refused", e.status_code, 400)

    if label == "session":
        sid = auth.get_session_resource_id()
        check("session resource", bool(sid), True)
        token = auth.get_session_key()
        auth.close()  # DELETE of the session
        # sushy would log in again on a 401, so ask with the old token directly.
        r = requests.get(url + sid, headers={"X-Auth-Token": token})
        check("old token refused after logout", r.status_code, 401)
print("DONE")
