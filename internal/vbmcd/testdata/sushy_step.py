"""One step of a Redfish flow, made with sushy exactly as Ironic makes it.

Usage: sushy_step.py URL USER PASSWORD SYSTEM_UUID STEP [ARG...]
Steps:
  boot TARGET ENABLED MODE   set_system_boot_options (Cd Once UEFI ...)
  reset TYPE                 reset_system (On, ForceOff, ForceRestart ...)
  show                       print power state and boot override
  session-logout             log in with a session, use it, log out
Prints one JSON object; exits non-zero on failure.
"""
import json
import os
import sys
import warnings

import sushy

warnings.filterwarnings("ignore")
url, user, password, uuid, step = sys.argv[1:6]
args = sys.argv[6:]

auth = sushy.auth.BasicAuth(user, password)
if step == "session-logout":
    auth = sushy.auth.SessionAuth(user, password)
root = sushy.Sushy(url + "/redfish/v1", auth=auth,
                   verify=os.environ.get("SUSHY_VERIFY", True))
system = root.get_system("/redfish/v1/Systems/" + uuid)

if step == "boot":
    target, enabled, mode = args
    system.set_system_boot_options(
        target=sushy.BootSource(target),
        enabled=sushy.BootSourceOverrideEnabled(enabled),
        mode=sushy.BootSourceOverrideMode(mode))
elif step == "reset":
    system.reset_system(sushy.ResetType(args[0]))
elif step == "session-logout":
    token = auth._session_key
    auth.close()
    print(json.dumps({"token": token}))
    sys.exit(0)
elif step != "show":
    print("unknown step " + step)
    sys.exit(2)

system.refresh()
boot = system.boot
print(json.dumps({
    "power": getattr(system.power_state, "value", system.power_state),
    "target": getattr(boot.target, "value", boot.target),
    "enabled": getattr(boot.enabled, "value", boot.enabled),
    "mode": getattr(boot.mode, "value", boot.mode),
}))
