"""SimpleUpdate as sushy 4.3 (Ironic 21.4) sends it: simple_update(image)
with no targets, so the request carries ImageURI and TransferProtocol only.

usage: sushy_update_notargets.py URL USER PASS IMAGE_URL
Prints one JSON object: the task monitor's URI, or the refusal's HTTP
status and its messages.
"""
import json
import sys
import warnings

import sushy

warnings.filterwarnings("ignore")
url, user, password, image = sys.argv[1:5]
root = sushy.Sushy(url + "/redfish/v1",
                   auth=sushy.auth.BasicAuth(user, password), verify=False)
out = {}
try:
    monitor = root.get_update_service().simple_update(image)
    out["monitor"] = monitor.task_monitor_uri
except sushy.exceptions.HTTPError as e:
    out["status_code"] = e.status_code
    out["detail"] = (e.body or {}).get("message", "")
    info = (e.body or {}).get("@Message.ExtendedInfo", [])
    out["messages"] = [{"id": m.get("MessageId", ""),
                        "message": m.get("Message", ""),
                        "resolution": m.get("Resolution", "")} for m in info]
print(json.dumps(out))
