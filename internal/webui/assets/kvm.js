// The graphical console's client: noVNC's RFB (an ES module, vendored
// unchanged under vendor/novnc), handed to app.js, which is a plain script.
import RFB from "/ui/assets/vendor/novnc/core/rfb.js";

window.RFB = RFB;
window.dispatchEvent(new Event("rfb-ready"));
