"""Dell's OEM at an iDRAC of its own, through Debian's sushy 5.5 and
sushy-oem-idrac 5.0 (Ironic 29's idrac hardware type's libraries), every
Dell call the package's own code: the manager extension Ironic's
drac_utils.execute_oem_manager_method loads (get_oem_extension('Dell')),
set_virtual_boot_device (Ironic 29's idrac-redfish-virtual-media), the
Lifecycle Controller's status, the job service, the job queue, and the
configuration export and import (Ironic's export_configuration and
import_configuration steps), whose job completes at the next boot.

Usage: sushy_oem_idrac.py URL CA USER PASSWORD MODE IMAGE
MODE: "all" runs everything; "refused" expects this iDRAC to refuse the
package's string ShareParameters.Target (iDRAC 10's list-only Target).
Prints DONE at the end.
"""
import json
import sys
import time

import sushy
from sushy_oem_idrac.resources.manager import manager as dell_manager

url, ca, user, password, mode, image = sys.argv[1:7]


def check(cond, what):
    if not cond:
        raise SystemExit("FAIL: " + what)
    print("ok:", what)


def finished(monitor, what):
    """Waits up to 60 s for a job's task monitor, then returns its Task."""
    deadline = time.time() + 60
    while monitor.check_is_processing:
        if time.time() > deadline:
            raise SystemExit("FAIL: %s: the job did not complete within 60 s of the boot" % what)
        time.sleep(monitor.sleep_for)
    task = monitor.get_task()
    print("job:", task.identity, task.task_state, task.task_status,
          [(m.message_id, m.message) for m in task.messages])
    return task


root = sushy.Sushy(url, username=user, password=password, verify=ca)
system = root.get_system()  # no id given: the one System, as Ironic asks
managers = system.managers
check(len(managers) == 1, "one manager: %s" % [m.path for m in managers])
mgr = managers[0]
oem = mgr.get_oem_extension('Dell')
check(isinstance(oem, dell_manager.DellManagerExtension),
      "the Dell manager extension loads: %r" % oem)
check(oem.import_system_configuration_uri.endswith(
    '/Actions/Oem/EID_674_Manager.ImportSystemConfiguration'),
    "import at %s" % oem.import_system_configuration_uri)

if mode == "refused":
    # sushy-oem-idrac retries a refused import 35 times 15 s apart; the
    # class's counts say so, and are set to meet the refusal once.
    dell_manager.DellManagerExtension.RETRY_COUNT = 0
    dell_manager.DellManagerExtension.RETRY_DELAY = 0
    try:
        oem.set_virtual_boot_device(sushy.VIRTUAL_MEDIA_CD, persistent=False,
                                    manager=mgr, system=system)
    except sushy.exceptions.BadRequestError as e:
        text = json.dumps(e.body)
        print("refused:", e)
        check('ActionParameterValueTypeError' in text and 'as a list' in text,
              "a string ShareParameters.Target is refused, saying a list is wanted")
    else:
        raise SystemExit("FAIL: the string Target was taken")
    print("DONE")
    sys.exit(0)

# The Lifecycle Controller's status (Ironic's reset_idrac waits for it).
check(oem.lifecycle_service.is_idrac_ready(), "LCStatus Ready")
check(oem.lifecycle_service.is_realtime_ready(), "RTStatus Ready")

# Ironic 29's idrac-redfish-virtual-media: insert where the BMC hangs its
# media (sushy 5.5 asks the System first), then the Dell OEM boot device.
try:
    vmedia = system.virtual_media
    where = "System"
except sushy.exceptions.MissingAttributeError:
    vmedia = mgr.virtual_media
    where = "Manager"
cd = [m for m in vmedia.get_members() if sushy.VIRTUAL_MEDIA_CD in m.media_types][0]
cd.insert_media(image, inserted=True, write_protected=True)
cd.refresh()
check(cd.inserted and cd.image == image, "inserted at %s's %s" % (where, cd.path))

oem.job_service.delete_jobs(job_ids=['JID_CLEARALL'])
# VCD-DVD once, as Ironic boots the deploy ISO; VFDD (the virtual floppy:
# the removable media) persistent.
for device, persistent, target, enabled in [
        (sushy.VIRTUAL_MEDIA_CD, False, sushy.BootSource.CD, sushy.BootSourceOverrideEnabled.ONCE),
        (sushy.VIRTUAL_MEDIA_FLOPPY, True, sushy.BootSource.USB, sushy.BootSourceOverrideEnabled.CONTINUOUS)]:
    oem.set_virtual_boot_device(device, persistent=persistent, manager=mgr, system=system)
    system.refresh()
    check(system.boot.target == target and system.boot.enabled == enabled,
          "the OEM import of %s set the override: %s %s" % (device, system.boot.target, system.boot.enabled))
cd.eject_media()

# Export, as Ironic's export_configuration step asks it.
resp = oem.export_system_configuration(include_destructive_fields=False)
conf = resp.json()
comps = {c['FQDD']: c for c in conf['SystemConfiguration']['Components']}
check('BIOS.Setup.1-1' in comps and 'iDRAC.Embedded.1' in comps, "the export has the BIOS and iDRAC components: %s" % sorted(comps))
bios = {a['Name']: a['Value'] for a in comps['BIOS.Setup.1-1']['Attributes']}
check(bios.get('ProcVirtualization') == 'Enabled', "exported ProcVirtualization %s" % bios.get('ProcVirtualization'))
order = bios['UefiBootSeq'].split(',')
check(len(order) > 1, "exported UefiBootSeq %s" % order)

# The NICs' PXE ports, as Ironic's drac inspection reads them in BIOS mode.
macs = {i.identity: i.mac_address for i in system.ethernet_interfaces.get_members()}
pxe = oem.get_pxe_port_macs_bios(macs)
check(set(pxe) <= set(macs.values()), "PXE ports %s among %s" % (pxe, macs))

# Import, as Ironic's import_configuration step does (NoReboot: the
# caller reboots), the profile changed: a BIOS attribute and the boot
# sequence reversed.
for a in comps['BIOS.Setup.1-1']['Attributes']:
    if a['Name'] == 'ProcVirtualization':
        a['Value'] = 'Disabled'
    if a['Name'] == 'UefiBootSeq':
        a['Value'] = ','.join(reversed(order))
monitor = oem.import_system_configuration(json.dumps(conf))
check(monitor.is_processing, "the import's job waits for a boot: %s" % monitor.task_monitor_uri)
jid = monitor.task_monitor_uri.rsplit('/', 1)[-1]
check(jid in oem.job_collection.get_unfinished_jobs(), "%s is in the job queue, unfinished" % jid)
system.refresh()
check(system.bios.attributes['ProcVirtualization'] == 'Enabled', "before the boot the BIOS is as it was")

system.reset_system(sushy.ResetType.ON if system.power_state == sushy.PowerState.OFF
                    else sushy.ResetType.FORCE_RESTART)
task = finished(monitor, "the import")
check(task.task_state == sushy.TaskState.COMPLETED and task.task_status == sushy.Health.OK,
      "the job completed OK")
check(not any(m.severity and m.severity != sushy.Severity.OK for m in task.messages)
      and not any('SYS055' in m.message_id for m in task.messages),
      "no message Ironic reads as a failure")
system.invalidate()
system.refresh()
check(system.bios.attributes['ProcVirtualization'] == 'Disabled', "after the boot the BIOS has the import's value")
got = root._conn.get(system.path).json()['Boot']['BootOrder']
check(got == list(reversed(order)), "the boot order is the import's: %s" % got)
check(jid not in oem.job_collection.get_unfinished_jobs(), "the job is finished in the queue")

# An import with an attribute this iDRAC does not have: the job completes
# with the error Ironic reads (SYS055), the good attribute is taken.
bad = {"SystemConfiguration": {"Components": [{"FQDD": "BIOS.Setup.1-1", "Attributes": [
    {"Name": "NoSuchAttribute", "Value": "x"},
    {"Name": "ProcVirtualization", "Value": "Enabled"}]}]}}
monitor = oem.import_system_configuration(json.dumps(bad))
system.reset_system(sushy.ResetType.FORCE_RESTART)
task = finished(monitor, "the import with an unknown attribute")
check(any('SYS055' in m.message_id and 'NoSuchAttribute' in m.message for m in task.messages),
      "the unknown attribute is reported with SYS055")
system.refresh()
check(system.bios.attributes['ProcVirtualization'] == 'Enabled', "the good attribute was taken")

# A job deleted from the queue before its boot: cancelled, its setting taken back.
monitor = oem.import_system_configuration(json.dumps(
    {"SystemConfiguration": {"Components": [{"FQDD": "BIOS.Setup.1-1", "Attributes": [
        {"Name": "ProcTurboMode", "Value": "Disabled"}]}]}}))
check(monitor.is_processing, "a third job waits")
oem.job_service.delete_jobs(job_ids=['JID_CLEARALL'])
check(oem.job_collection.get_unfinished_jobs() == [], "the queue is empty after JID_CLEARALL")
pending = root._conn.get(system.path + '/Bios/Settings').json()['Attributes']
check('ProcTurboMode' not in pending, "the deleted job's setting is no longer pending: %s" % pending)

# The iDRAC card's reset (Ironic's reset_idrac posts it, then waits).
oem.idrac_card_service.reset_idrac()
print("DONE")
