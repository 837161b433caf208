"""Meets one vendor quirk through python3-sushy (4.3.3, Ironic 21.4's), doing
what Ironic's redfish driver does, and prints what the client sees.

Usage: sushy_quirks.py URL USER PASSWORD QUIRK ON|OFF SYSTEM_ID [IMAGE_URL]
With ON the quirk must show; with OFF the same calls must succeed.
Exits non-zero on the first surprise.
"""
import sys
import time

import sushy
from sushy import exceptions
from sushy.resources.manager import virtual_media

from checks import check

url, user, password, quirk, on, sysid = sys.argv[1:7]
image = sys.argv[7] if len(sys.argv) > 7 else None
on = on == "ON"
root = sushy.Sushy(url + "/redfish/v1",
                   auth=sushy.auth.SessionOrBasicAuth(user, password))
system = root.get_system("/redfish/v1/Systems/" + sysid)


def attempt(what, fn):
    """Runs fn; returns the sushy error it raised, or None."""
    try:
        fn()
        print(f"{what}: succeeded")
        return None
    except exceptions.SushyError as e:
        print(f"{what}: {type(e).__name__}: {e}")
        return e


def status(e):
    return getattr(e, "status_code", None)


def media_member(name):
    """The member named name, under the Manager where sushy 4.3.3 looks,
    or under the System (iDRAC 10)."""
    mgr = system.managers[0]
    try:
        coll = mgr.virtual_media
    except exceptions.MissingAttributeError:
        coll = virtual_media.VirtualMediaCollection(
            root._conn, system.json["VirtualMedia"]["@odata.id"],
            redfish_version=root.redfish_version)
    return coll.get_member(coll.path + "/" + name)


if quirk == "power-on-conflict":
    # Ironic's RedfishPower.set_power_state: reset_system once, and a
    # SushyError fails the power action (Ironic 21.4 has no retry on 409).
    # A running server, powered off, then on again: a reboot by Ironic.
    system.reset_system(sushy.ResetType.ON)
    system.reset_system(sushy.ResetType.FORCE_OFF)
    e = attempt("power on after power off", lambda: system.reset_system(sushy.ResetType.ON))
    if not on:
        check("power on at once", e, None)
    else:
        check("power on answered 409", status(e), 409)
        start = time.monotonic()
        while attempt("retry", lambda: system.reset_system(sushy.ResetType.ON)) is not None:
            time.sleep(0.25)
        print(f"power on accepted after {time.monotonic() - start:.1f} s of retries")
    system.refresh()
    check("power state", system.power_state, sushy.PowerState.ON)

elif quirk == "refuse-in-post":
    # Ironic sets the boot device, then powers on; on a reboot it meets a
    # server in POST. Power on, then set the boot device at once.
    system.reset_system(sushy.ResetType.ON)
    system.refresh()
    post = system.json["Oem"]["Hpe"]["PostState"]
    print(f"Oem.Hpe.PostState: {post}")
    check("PostState right after power on", post, "InPost")
    e = attempt("set boot device in POST", lambda: system.set_system_boot_options(
        sushy.BootSource.PXE, enabled=sushy.BootSourceOverrideEnabled.ONCE))
    if on:
        check("refused with 400", status(e), 400)
        start = time.monotonic()
        while True:
            system.refresh()
            if system.json["Oem"]["Hpe"]["PostState"] == "FinishedPost":
                break
            time.sleep(0.25)
        print(f"FinishedPost after {time.monotonic() - start:.1f} s")
        check("set boot device after POST", attempt("again", lambda: system.set_system_boot_options(
            sushy.BootSource.PXE, enabled=sushy.BootSourceOverrideEnabled.ONCE)), None)
    else:
        check("set boot device in POST", e, None)

elif quirk == "stale-inserted":
    cd = media_member(sys.argv[8])
    cd.insert_media(image)
    cd.eject_media()
    cd.refresh()
    print(f"after eject: Inserted {cd.inserted}, Image {cd.image}")
    check("Inserted right after eject", cd.inserted, on)
    if on:
        # Ironic now always ejects before an insert; a second eject is
        # harmless, and the member reads empty once the window passes.
        cd.eject_media()
        start = time.monotonic()
        while True:
            cd.refresh()
            if not cd.inserted:
                break
            time.sleep(0.25)
        print(f"Inserted false after {time.monotonic() - start:.1f} s")

elif quirk == "media-slot-one":
    two = media_member("2")
    e = attempt("insert in slot 2", lambda: two.insert_media(image))
    check("slot 2 refused" if on else "slot 2 takes it", status(e), 400 if on else None)
    if not on:
        two.eject_media()
    one = media_member("1")
    check("insert in slot 1", attempt("insert in slot 1", lambda: one.insert_media(image)), None)
    one.eject_media()

elif quirk == "eject-needs-power-off":
    cd = media_member(sys.argv[8])
    cd.insert_media(image)
    system.reset_system(sushy.ResetType.ON)
    e = attempt("eject while on", cd.eject_media)
    if on:
        check("eject refused with 409", status(e), 409)
        system.reset_system(sushy.ResetType.FORCE_OFF)
        check("eject after power off", attempt("eject while off", cd.eject_media), None)
    else:
        check("eject while on", e, None)
    cd.refresh()
    check("ejected", cd.inserted, False)

elif quirk == "slow-bios-patch":
    # Newer sushy gives every request a read timeout (Ironic's
    # [redfish]read_timeout, 60 s); 4.3.3 has none, so the test gives its
    # session one, shortened with the quirk's window.
    read_timeout = float(sys.argv[7])
    session = root._conn._session
    plain = session.request
    session.request = lambda *a, **kw: plain(*a, timeout=read_timeout, **kw)
    bios = system.bios
    start = time.monotonic()
    e = attempt("BIOS PATCH", lambda: bios.set_attributes({"QuietBoot": True}))
    took = time.monotonic() - start
    print(f"BIOS PATCH ended after {took:.1f} s")
    if on:
        check("read timed out", isinstance(e, exceptions.ConnectionError), True)
    else:
        check("BIOS PATCH answered", e, None)
    session.request = plain
    bios.refresh()
    check("the change is pending anyway", bios.pending_attributes.get("QuietBoot"), True)
else:
    print("unknown quirk " + quirk)
    sys.exit(2)
print("DONE")
