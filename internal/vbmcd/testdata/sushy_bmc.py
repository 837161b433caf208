"""A server's own BMC as Ironic's sushy sees it: the one System, Manager
and Chassis found without naming them, and SimpleUpdate without Targets
(sushy 4.3, Ironic 21.4).

usage: sushy_bmc.py URL USER PASS CA_FILE [IMAGE_URL]
Prints one JSON object: the identities found, the task monitor of the
update (when IMAGE_URL is given), or the error.
"""
import json
import sys
import warnings

import sushy

warnings.filterwarnings("ignore")
url, user, password, ca = sys.argv[1:5]
image = sys.argv[5] if len(sys.argv) > 5 else ""
out = {}
try:
    root = sushy.Sushy(url + "/redfish/v1",
                       auth=sushy.auth.BasicAuth(user, password), verify=ca)
    out["system"] = root.get_system().identity
    out["manager"] = root.get_manager().identity
    out["chassis"] = root.get_chassis().identity
    power = root.get_system().power_state
    out["power"] = str(getattr(power, "value", power))
    if image:
        monitor = root.get_update_service().simple_update(image)
        out["monitor"] = monitor.task_monitor_uri
except Exception as e:  # the test reads what failed
    out["error"] = "%s: %s" % (type(e).__name__, e)
print(json.dumps(out))
