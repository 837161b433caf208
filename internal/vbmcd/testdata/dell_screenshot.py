#!/usr/bin/python3
"""A screenshot from an iDRAC the way Dell's ExportServerScreenShotREDFISH.py
(dell/iDRAC-Redfish-Scripting, v2.0) takes one, with python3-requests:
GET the Manager's DellLCService (the script stops unless it is 200), POST
its DellLCService.ExportServerScreenShot with a FileType, accept 200 or 202,
and read ServerScreenShotFile, a base64 PNG, from the POST's own answer.

usage: dell_screenshot.py HOST USER PASSWORD CA_FILE FILETYPE OUT.png
"""
import base64
import json
import sys

import requests

host, user, password, ca, filetype, out = sys.argv[1:7]
base = "https://%s/redfish/v1/Managers/iDRAC.Embedded.1/Oem/Dell/DellLCService" % host
auth = (user, password)

r = requests.get(base, auth=auth, verify=ca, timeout=60)
if r.status_code != 200:
    sys.exit("GET %s: %d %s" % (base, r.status_code, r.text))

url = base + "/Actions/DellLCService.ExportServerScreenShot"
r = requests.post(url, data=json.dumps({"FileType": filetype}),
                  headers={"content-type": "application/json"},
                  auth=auth, verify=ca, timeout=60)
if r.status_code not in (200, 202):
    sys.exit("POST %s: %d %s" % (url, r.status_code, r.text))
data = r.json()
png = base64.b64decode(data["ServerScreenShotFile"])
with open(out, "wb") as f:
    f.write(png)
print("POST %s: %d, %d bytes of PNG" % (url, r.status_code, len(png)))
