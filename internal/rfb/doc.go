// Package rfb is a small client of RFB, the remote framebuffer protocol
// VNC speaks (RFC 6143): the handshake without authentication (the
// displays vbmcd opens are unix sockets only root and the hypervisor can
// open), a capture of the whole screen in the Raw encoding, and key
// events named the way people name keys ("Enter", "Ctrl-Alt-Delete",
// "F2"), sent as X keysyms.
//
// It is what lets the machine model take a screenshot of a machine's
// screen and type on its keyboard through the display a backend opens
// (machine.DisplayOpener: a libvirt domain's VNC socket), the same display
// the web console's graphical console shows.
//
// What it does not do: draw, accept connections, authenticate with a
// password, or speak any encoding but Raw (and the DesktopSize
// pseudo-encoding, to follow a screen that changes size).
package rfb
