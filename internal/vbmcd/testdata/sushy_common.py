"""What the sushy flow scripts here share: their arguments, a fix for
Debian's python3-sushy, the connection, made as Ironic makes it, and the
wait on a task monitor.

Every script is run as SCRIPT URL USER PASSWORD SYSTEM_UUID STEP [ARG...].
"""
import os
import sys
import time
import warnings

import sushy


def connect():
    """Returns the root, the step and its arguments, and the system's path."""
    warnings.filterwarnings("ignore")
    # Debian's python3-sushy leaves out the DMTF registries sushy bundles
    # (sushy/standard_registries/), and sushy then fails to list any
    # registry. Without them sushy still reads every registry the service
    # serves, which is what these flows need.
    if not os.path.isdir(os.path.join(os.path.dirname(sushy.__file__),
                                      "standard_registries")):
        sushy.main.Sushy._get_standard_message_registry_collection = \
            lambda self: []
    url, user, password, uuid, step = sys.argv[1:6]
    root = sushy.Sushy(url + "/redfish/v1",
                       auth=sushy.auth.BasicAuth(user, password),
                       verify=os.environ.get("SUSHY_VERIFY", True))
    return root, step, sys.argv[6:], "/redfish/v1/Systems/" + uuid


def task_monitor(root, args):
    """Returns the task monitor at args[0]; with "wait" as args[1], once it
    is done (or after 120 s), polled at the interval it asks for."""
    monitor = root.get_task_monitor(args[0])
    if len(args) > 1 and args[1] == "wait":
        deadline = time.time() + 120
        while monitor.check_is_processing and time.time() < deadline:
            time.sleep(float(monitor.sleep_for))
    return monitor
