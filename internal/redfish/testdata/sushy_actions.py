"""Every action and change Ironic makes through sushy, once each: the
refusal of a POST without a JSON Content-Type (issue 32) must not break
one. sushy's EjectMedia and ResetBios POST without a body first and send
{} when answered 415 or 400; the rest always send JSON.

Usage: sushy_actions.py URL USER PASSWORD SYSTEM_UUID
Prints one line per step; exits non-zero on the first failure.
"""
import sys
import time

import sushy

url, user, password, uuid = sys.argv[1:5]


def step(name, fn):
    fn()
    print("ok", name)


# SessionOrBasicAuth is what Ironic's redfish driver uses by default.
root = sushy.Sushy(url + "/redfish/v1", auth=sushy.auth.SessionOrBasicAuth(user, password))
system = root.get_system("/redfish/v1/Systems/" + uuid)
manager = root.get_manager("/redfish/v1/Managers/" + uuid)

step("ComputerSystem.Reset On", lambda: system.reset_system(sushy.ResetType.ON))
step("ComputerSystem.Reset ForceRestart", lambda: system.reset_system(sushy.ResetType.FORCE_RESTART))
step("boot override (PATCH)", lambda: system.set_system_boot_options(
    target=sushy.BootSource.PXE, enabled=sushy.BootSourceOverrideEnabled.ONCE,
    mode=sushy.BootSourceOverrideMode.UEFI))
step("BIOS attributes (PATCH)", lambda: system.bios.set_attributes({"ProcTurboMode": "Disabled"}))
step("Bios.ResetBios", lambda: system.bios.reset_bios())
step("SecureBoot enable (PATCH)", lambda: system.secure_boot.set_enabled(True))
step("SecureBoot.ResetKeys", lambda: system.secure_boot.reset_keys(
    sushy.SecureBootResetKeysType.RESET_ALL_KEYS_TO_DEFAULT))
cds = [m for m in manager.virtual_media.get_members()
       if sushy.VirtualMediaType.CD in m.media_types]
step("VirtualMedia.EjectMedia", lambda: cds[0].eject_media())
step("EventService.SubmitTestEvent", lambda: root.get_event_service().submit_test_event(
    "1", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "Alert", "from sushy", [],
    "Base.1.16.0.Success", "/redfish/v1/Systems/" + uuid, "OK"))
step("ComputerSystem.Reset ForceOff", lambda: system.reset_system(sushy.ResetType.FORCE_OFF))
step("Manager.Reset", lambda: manager.reset_manager(sushy.ResetType.GRACEFUL_RESTART))
print("DONE")
