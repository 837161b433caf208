"""Subscribes to events with sushy, the way Ironic does, against a BMC whose
outbound address policy refuses loopback (vbmcd's default): the refusals
are 400s sushy reports, a Destination naming loopback through a host name
is never delivered to and ends suspended, and a Destination's credentials
are not shown.

Usage: sushy_event_policy.py URL USER PASSWORD
Prints one line per step; exits non-zero on the first failure.
"""
import http.server
import sys
import threading
import time

import sushy
from sushy import exceptions

url, user, password = sys.argv[1:4]
hits = []


class Listener(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        hits.append(self.path)
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


srv = http.server.HTTPServer(("127.0.0.1", 0), Listener)
threading.Thread(target=srv.serve_forever, daemon=True).start()
port = srv.server_port


def check(what, got_value, want):
    if got_value != want:
        print(f"FAIL {what}: got {got_value!r}, want {want!r}")
        sys.exit(1)
    print(f"ok {what}")


def refused(what, payload, must_name):
    try:
        es.subscriptions.create(payload)
    except exceptions.BadRequestError as e:
        check(what + " names " + must_name, must_name in str(e) or must_name in str(e.body), True)
        return
    print(f"FAIL {what}: created, want a 400")
    sys.exit(1)


root = sushy.Sushy(url + "/redfish/v1", auth=sushy.auth.SessionAuth(user, password))
es = root.get_event_service()

refused("loopback destination", {"Destination": f"http://127.0.0.1:{port}/events", "Protocol": "Redfish"},
        "--events-allow-loopback")
refused("unspecified destination", {"Destination": f"http://0.0.0.0:{port}/events", "Protocol": "Redfish"},
        "unspecified")
refused("metadata header", {"Destination": f"http://localhost:{port}/events", "Protocol": "Redfish",
                            "HttpHeaders": [{"Metadata-Flavor": "Google"}]}, "Metadata-Flavor")
refused("AWS token header", {"Destination": f"http://localhost:{port}/events", "Protocol": "Redfish",
                             "HttpHeaders": [{"X-aws-ec2-metadata-token": "AQAE"}]}, "X-aws-ec2-metadata-token")

sub = es.subscriptions.create({
    "Destination": f"http://ironic:s3cret-pw@localhost:{port}/events", "EventTypes": ["Alert"],
    "Context": "ironic-node-1", "Protocol": "Redfish"})
check("destination shown without its password", "s3cret-pw" in sub.destination, False)
check("destination shown redacted", sub.destination.startswith("http://ironic:xxxxx@localhost"), True)

es.submit_test_event(event_id="1", event_timestamp="2026-11-23T00:00:00Z",
                     event_type="Alert", message="to localhost",
                     message_id="Base.1.0.Success", message_args=[],
                     origin="/redfish/v1/Systems", severity="OK")
state = None
for _ in range(200):
    sub.refresh()
    state = sub.json.get("Status", {}).get("State")
    if state == "Disabled":
        break
    time.sleep(0.05)
check("subscription kept and suspended", state, "Disabled")
check("retry policy", sub.json.get("DeliveryRetryPolicy"), "SuspendRetries")
check("nothing delivered to loopback through a name", hits, [])
es.subscriptions.refresh()
check("still listed", sub.path in es.subscriptions.members_identities, True)

root._conn.post(sub.path + "/Actions/EventDestination.ResumeSubscription", data={})
sub.refresh()
check("resumed", sub.json["Status"]["State"], "Enabled")
sub.delete()
