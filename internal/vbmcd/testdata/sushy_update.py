"""One step of a firmware update, made with sushy's update service API as
Ironic's redfish firmware interface makes it (simple_update with the
system as target, then the task monitor polled until it is no longer
processing, then its task read).

Usage: sushy_update.py URL USER PASSWORD SYSTEM_UUID STEP [ARG...]
Steps:
  update IMAGE [TARGET]   simple_update; prints the task monitor's URI and
                          whether it is processing (TARGET defaults to the
                          system)
  monitor URI [wait]      the task monitor: processing or not; with wait,
                          polls it (at its Retry-After) until it is not
  inventory               the firmware inventory, BiosVersion, the
                          Manager's FirmwareVersion
  stable N INTERVAL TIMEOUT
                          Ironic's check that the BMC is back after an
                          update: the System, its Manager, its Chassis'
                          NetworkAdapters and their members read N times
                          in a row, INTERVAL seconds apart, within TIMEOUT
Prints one JSON object; a refused request gives its HTTP status and
message IDs; exits non-zero on any other failure.
"""
import json
import sys
import time

import sushy

import sushy_common

root, step, args, system_path = sushy_common.connect()
out = {}


def describe(monitor):
    out["monitor"] = monitor.task_monitor_uri
    out["processing"] = monitor.is_processing
    # As Ironic does once the monitor says done: the task, read from the
    # monitor's URI; while processing, the task the monitor returned.
    task = monitor.get_task() if not monitor.is_processing else monitor.task
    if task is not None:
        out["state"] = getattr(task.task_state, "value", task.task_state)
        out["status"] = getattr(task.task_status, "value", task.task_status)
        out["percent"] = task.percent_complete
        out["messages"] = [{"id": m.message_id, "message": m.message}
                           for m in task.messages or []]


if step == "update":
    target = args[1] if len(args) > 1 else system_path
    try:
        monitor = root.get_update_service().simple_update(
            args[0], targets=[target])
        describe(monitor)
    except sushy.exceptions.HTTPError as e:
        info = (e.body or {}).get("@Message.ExtendedInfo", [])
        out["status_code"] = e.status_code
        out["messages"] = [{"id": m.get("MessageId", "")} for m in info]
elif step == "monitor":
    monitor = sushy_common.task_monitor(root, args)
    describe(monitor)
elif step == "inventory":
    inv = root.get_update_service().firmware_inventory
    out["inventory"] = {m.identity: m.version for m in inv.get_members()}
    system = root.get_system(system_path)
    out["bios_version"] = system.bios_version
    out["bmc_version"] = root.get_manager(
        system_path.replace("/Systems/", "/Managers/")).firmware_version
elif step == "stable":
    need, interval, timeout = int(args[0]), float(args[1]), float(args[2])
    deadline = time.time() + timeout
    ok, attempts, errors = 0, 0, []
    while ok < need and time.time() < deadline:
        attempts += 1
        try:
            # As Ironic's _validate_resources_stability: fresh reads of
            # the System, its Manager and its Chassis' NetworkAdapters.
            system = root.get_system(system_path)
            system.managers[0].refresh()
            adapters = system.chassis[0].network_adapters
            if adapters is not None:
                adapters.get_members()
            ok += 1
        except (sushy.exceptions.SushyError, ValueError) as e:
            ok = 0
            errors.append(type(e).__name__ + ": " + str(e)[:200])
        if ok < need:
            time.sleep(interval)
    out["stable"] = ok >= need
    out["attempts"] = attempts
    out["errors"] = errors
else:
    print("unknown step " + step)
    sys.exit(2)
print(json.dumps(out))
