"""Ironic's redfish-virtual-media flow, as its boot interface calls sushy:
eject every member of every manager, insert the ISO into the CD member with
insert_media(url, inserted=True, write_protected=True) (which sends only
Image), set a Once boot override to Cd, power on.

usage: sushy_vmedia.py URL USER PASS SYSTEM_ID IMAGE_URL
"""
import sys
import time

import sushy

url, user, password, system_id, image = sys.argv[1:6]
root = sushy.Sushy(url, username=user, password=password, verify=False)
system = root.get_system("/redfish/v1/Systems/" + system_id)

t0 = time.monotonic()
cd = None
for manager in system.managers:
    for vmedia in manager.virtual_media.get_members():
        vmedia.eject_media()
        if cd is None and (sushy.VIRTUAL_MEDIA_CD in vmedia.media_types or
                           sushy.VIRTUAL_MEDIA_DVD in vmedia.media_types):
            cd = vmedia
if cd is None:
    sys.exit("no CD member")
print("ejected all members in %.3fs" % (time.monotonic() - t0))

t = time.monotonic()
cd.insert_media(image, inserted=True, write_protected=True)
print("insert_media took %.3fs" % (time.monotonic() - t))

system.set_system_boot_options(sushy.BOOT_SOURCE_TARGET_CD,
                               enabled=sushy.BOOT_SOURCE_ENABLED_ONCE)
t = time.monotonic()
system.reset_system(sushy.RESET_ON)
print("reset_system(On) took %.3fs" % (time.monotonic() - t))
print("whole flow %.3fs" % (time.monotonic() - t0))

cd.refresh()
system.refresh()
print("inserted=%s image=%s power=%s" % (cd.inserted, cd.image, system.power_state))
if not cd.inserted or cd.image != image:
    sys.exit("the CD does not show the image")
print("DONE")
