"""Subscribes to events with sushy's EventService API, the way Ironic's
redfish vendor passthru (create_subscription) does, and checks delivery.

Usage: sushy_events.py URL USER PASSWORD
Prints one line per step; exits non-zero on the first failure.
"""
import http.server
import json
import sys
import threading

import sushy

from checks import check

url, user, password = sys.argv[1:4]
received = []
got = threading.Event()


class Listener(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        received.append((json.loads(body), self.headers.get("X-Ironic")))
        self.send_response(204)
        self.end_headers()
        got.set()

    def log_message(self, *args):
        pass


srv = http.server.HTTPServer(("127.0.0.1", 0), Listener)
threading.Thread(target=srv.serve_forever, daemon=True).start()
dest = "http://127.0.0.1:%d/events" % srv.server_port


root = sushy.Sushy(url + "/redfish/v1", auth=sushy.auth.SessionAuth(user, password))
es = root.get_event_service()
check("event service enabled", es.service_enabled, True)
check("Alert subscribable", "Alert" in [getattr(t, "value", t) for t in es.get_event_types_for_subscription()], True)

# Ironic's payload: Destination, EventTypes, Context, Protocol, HttpHeaders.
sub = es.subscriptions.create({
    "Destination": dest, "EventTypes": ["Alert"], "Context": "ironic-node-1",
    "Protocol": "Redfish", "HttpHeaders": [{"X-Ironic": "secret"}]})
check("subscription destination", sub.destination, dest)
check("subscription context", sub.context, "ironic-node-1")
check("listed", sub.path in es.subscriptions.members_identities, True)

es.submit_test_event(event_id="1", event_timestamp="2026-11-23T00:00:00Z",
                     event_type="Alert", message="sushy test event",
                     message_id="Base.1.0.Success", message_args=[],
                     origin="/redfish/v1/Systems", severity="OK")
check("delivered", got.wait(10), True)
event, header = received[0]
check("event message", event["Events"][0]["Message"], "sushy test event")
check("event context", event["Context"], "ironic-node-1")
check("headers sent", header, "secret")

sub.delete()
es.subscriptions.refresh()
check("deleted", sub.path in es.subscriptions.members_identities, False)
