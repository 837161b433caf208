"""One step of a secure boot or UEFI HTTP boot flow, made with sushy as
Ironic makes it: its redfish management interface's clean steps
(reset_secure_boot_keys_to_default, clear_secure_boot_keys: both
secure_boot.reset_keys), set_secure_boot_state (secure_boot.set_enabled),
and the redfish-https boot interface's UefiHttp override with HttpBootUri.

Usage: sushy_secureboot.py URL USER PASSWORD SYSTEM_UUID STEP [ARG...]
Steps:
  show                     print secure boot and its databases
  enable true|false        secure_boot.set_enabled
  reset-keys TYPE          secure_boot.reset_keys (ResetAllKeysToDefault,
                           DeleteAllKeys, DeletePK)
  db-reset-keys DB TYPE    one database's reset_keys
  http-boot URI ENABLED [MODE]
                           PATCH Boot with target UefiHttp, HttpBootUri and
                           BootSourceOverrideEnabled (and
                           BootSourceOverrideMode, UEFI or Legacy), as
                           sushy >= 4.8's set_system_boot_options(
                           http_boot_uri=...) sends it (Debian's sushy 4.3
                           has no http_boot_uri, so the step sends it
                           through sushy's connector)
  reset TYPE               system.reset_system
Prints one JSON object ("databases" only when the system links them); a
refused request gives its HTTP status and Base message IDs. Exits non-zero
on any other failure.
"""
import json
import sys

import sushy

import sushy_common
from sushy import exceptions

root, step, args, system_path = sushy_common.connect()
system = root.get_system(system_path)
conn = system._conn
out = {}


def refused(e):
    ids = [m.get("MessageId", "").split(".")[-1]
           for m in e.body.get("@Message.ExtendedInfo", [])]
    return {"status": e.status_code, "messages": ids}


try:
    if step == "enable":
        system.secure_boot.set_enabled(args[0] == "true")
    elif step == "reset-keys":
        system.secure_boot.reset_keys(sushy.SecureBootResetKeysType(args[0]))
    elif step == "db-reset-keys":
        dbs = system.secure_boot.databases
        db = dbs.get_member(dbs.path + "/" + args[0])
        db.reset_keys(sushy.SecureBootResetKeysType(args[1]))
    elif step == "http-boot":
        boot = {
            "BootSourceOverrideTarget": sushy.BOOT_SOURCE_TARGET_UEFI_HTTP.value,
            "BootSourceOverrideEnabled": args[1],
            "HttpBootUri": args[0]}
        if len(args) > 2:
            boot["BootSourceOverrideMode"] = args[2]
        conn.patch(system.path, data={"Boot": boot})
    elif step == "reset":
        system.reset_system(sushy.ResetType(args[0]))
    elif step != "show":
        sys.exit("unknown step " + step)
except exceptions.HTTPError as e:
    out["refused"] = refused(e)

sb = root.get_system(system_path).secure_boot
out["enabled"] = sb.enabled
out["mode"] = str(sb.mode)
out["current_boot"] = str(sb.current_boot)
try:
    dbs = sb.databases.get_members()
    out["databases"] = {}
except exceptions.MissingAttributeError:
    # The system links no key databases (KubeVirt): no "databases".
    dbs = []
for db in dbs:
    certs = conn.get(db.path + "/Certificates").json()
    sigs = conn.get(db.path + "/Signatures").json()
    subjects = []
    for m in certs["Members"]:
        c = conn.get(m["@odata.id"]).json()
        subjects.append(c.get("Subject", {}).get("CommonName", ""))
    out["databases"][db.identity] = {
        "database_id": str(db.database_id),
        "certificates": subjects,
        "signatures": sigs["Members@odata.count"],
    }
boot = conn.get(system.path).json()["Boot"]
out["boot"] = {k: boot.get(k) for k in (
    "BootSourceOverrideTarget", "BootSourceOverrideEnabled",
    "BootSourceOverrideMode", "HttpBootUri")}
print(json.dumps(out))
