"""RAID volumes made and deleted with sushy the way Ironic's redfish RAID
interface does it (ironic/drivers/modules/redfish/raid.py): find the
storage whose controller has RAID types and the drive, build the payload,
create with the apply time the Volumes collection supports, delete with it.

Usage: sushy_raid.py URL USER PASSWORD SYSTEM_UUID create DRIVE_ID RAID SIZE
       sushy_raid.py URL USER PASSWORD SYSTEM_UUID delete VOLUME_ID
       sushy_raid.py URL USER PASSWORD SYSTEM_UUID monitor URI [wait]
A create applied OnReset answers with a task monitor (its URI is printed);
monitor reads it as Ironic polls it, with wait until it is done.
Prints one JSON object; exits non-zero on failure.
"""
import json
import sys

import sushy
from sushy import taskmonitor

import sushy_common

root, step, args, system_path = sushy_common.connect()
system = root.get_system(system_path)


def apply_time(collection):
    support = collection.operation_apply_time_support
    if support and support.mapped_supported_values:
        if sushy.APPLY_TIME_IMMEDIATE in support.mapped_supported_values:
            return sushy.APPLY_TIME_IMMEDIATE
        if sushy.APPLY_TIME_ON_RESET in support.mapped_supported_values:
            return sushy.APPLY_TIME_ON_RESET
    return None


storage = None
for s in system.storage.get_members():
    ctrl = s.storage_controllers[0] if s.storage_controllers else None
    if ctrl is not None and ctrl.raid_types == []:
        continue
    storage = s
    break
if storage is None:
    print("no storage controller with RAID types")
    sys.exit(1)
volumes = storage.volumes

if step == "create":
    drive_id, raid, size = args
    drive = [d for d in storage.drives if d.identity == drive_id][0]
    payload = {"RAIDType": raid, "CapacityBytes": int(size),
               "Links": {"Drives": [{"@odata.id": drive._path}]}}
    at = apply_time(volumes)
    vol = volumes.create(payload, apply_time=at)
    monitor = ""
    if isinstance(vol, taskmonitor.TaskMonitor):
        monitor = vol.task_monitor_uri
    volumes.refresh()
    ids = [v.identity for v in volumes.get_members()]
    print(json.dumps({"apply_time": str(at), "volumes": ids, "monitor": monitor,
                      "raid_types": [str(t) for t in storage.storage_controllers[0].raid_types]}))
elif step == "monitor":
    monitor = sushy_common.task_monitor(root, args)
    task = monitor.get_task() if not monitor.is_processing else monitor.task
    print(json.dumps({"processing": monitor.is_processing,
                      "state": str(getattr(task.task_state, "value", task.task_state)) if task else ""}))
elif step == "delete":
    vol = volumes.get_member(volumes.path + "/" + args[0])
    vol.delete(apply_time=apply_time(volumes))
    volumes.refresh()
    print(json.dumps({"volumes": [v.identity for v in volumes.get_members()]}))
else:
    print("unknown step " + step)
    sys.exit(2)
