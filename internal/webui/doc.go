// Package webui is vbmcd's web console: a browser's view of the machines a
// BMC serves, on the Redfish listener at / (Wrap sends /redfish, and an
// iLO's /ribcl, to the Redfish handler and the rest here).
//
// The page (assets/, embedded with go:embed: plain JavaScript, no build
// step, no request to another origin) logs in with a Redfish session and
// makes every change through the Redfish API with its token, so the roles
// are the API's: ReadOnly sees, Operator acts, Administrator also manages
// accounts. This package adds what Redfish has no cheap form for, behind
// the same session token (X-Auth-Token, never a cookie): a page of system
// rows (/ui/api/systems), a Server-Sent Events stream of the rows that
// change (/ui/api/live), a short event log per machine derived from the
// model's events (live.go), and the serial console as a websocket
// (/ui/console/<id>, console.go) on the model's shared console stream, the
// one IPMI SOL sessions read too, with a scroll-back that also holds what
// the domain's serial log file has from before the stream connected, and
// the graphical console (/ui/display/<id>, display.go): the backend's VNC
// display copied to noVNC in the page.
//
// Both consoles are admitted alike (console.go's accept) and held to their
// session alike (hold). Live streams and consoles hold slots taken once their token is valid,
// shared per user and per source, and are held to their session: they end
// (or a console closes, when its role no longer allows it) as soon as the
// session ends or its account changes, and never keep the session alive
// (slots.go). The console's websocket needs this listener's own Origin.
//
// What it does not do: decide anything about a machine (the model does),
// keep state across restarts (the event log and the console's scroll-back
// are in memory and bounded; the serial log is the backend's), or serve anything without a session but the
// page and its static assets.
package webui
