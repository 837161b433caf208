// vbmcd web console: plain JavaScript, no build step. Every read and change
// goes through vbmcd's Redfish API with the session token of the login
// (X-Auth-Token, kept in sessionStorage: it is sent by this script only, never
// by the browser on its own, so a cross-site page cannot act as the user).
// /ui/api/* adds what Redfish has no cheap form for: one page of system rows,
// a stream of the rows that change, a short event log per system; the serial
// console is a websocket on /ui/console/<id>, the graphical one (noVNC) one
// on /ui/display/<id>.
"use strict";

const PAGE = 50;
const RESETS = ["On", "GracefulShutdown", "ForceOff", "GracefulRestart", "ForceRestart", "PowerCycle", "Nmi"];

const state = {
  token: sessionStorage.getItem("vbmcd.token") || "",
  session: sessionStorage.getItem("vbmcd.session") || "",
  me: null,
  live: null,           // AbortController of the live stream
  onRows: null,         // the current view's handler of live rows
  leave: null,          // the current view's clean-up
};

// ---- small DOM helpers (text only: nothing from the API becomes markup) ----

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") e.className = v;
    else if (k === "text") e.textContent = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? "" : v);
  }
  for (const k of kids.flat()) {
    if (k === null || k === undefined || k === false) continue;
    e.append(k instanceof Node ? k : document.createTextNode(String(k)));
  }
  return e;
}

function $(id) { return document.getElementById(id); }

function toast(msg, bad) {
  const t = $("toast");
  t.textContent = msg;
  t.className = bad ? "bad" : "good";
  t.hidden = false;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => { t.hidden = true; }, bad ? 8000 : 3000);
}

// ---- the API ----

// api calls vbmcd and returns {status, body, headers}; a 401 ends the session.
async function api(method, path, body) {
  const headers = { "Accept": "application/json" };
  if (state.token) headers["X-Auth-Token"] = state.token;
  const init = { method, headers, cache: "no-store", credentials: "omit" };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let r;
  for (let attempt = 0; ; attempt++) {
    try {
      r = await fetch(path, init);
      break;
    } catch (e) {
      // The network failed under the request (a dropped connection, the
      // browser's "network changed"): a read is tried again, a change is
      // reported, since it may or may not have been done.
      if (method === "GET" && attempt < 3) { await new Promise((ok) => setTimeout(ok, 300 * (attempt + 1))); continue; }
      return { status: 0, body: { error: "network error (" + e.message + "); check the state before trying again" }, headers: new Headers() };
    }
  }
  let data = null;
  const text = await r.text().catch(() => "");
  if (text) { try { data = JSON.parse(text); } catch (e) { data = { text }; } }
  if (r.status === 401 && path !== "/redfish/v1/SessionService/Sessions") {
    forget();
    showLogin("Your session ended; log in again.");
    // The view that asked is gone: its caller never resumes.
    return new Promise(() => {});
  }
  return { status: r.status, body: data, headers: r.headers };
}

// errorText is the message of a Redfish (or /ui/api) error body.
function errorText(res) {
  const b = res.body || {};
  if (b.error && b.error["@Message.ExtendedInfo"] && b.error["@Message.ExtendedInfo"].length) {
    const infos = b.error["@Message.ExtendedInfo"];
    const i = infos[0];
    // With one message, the top-level message is it and what the service
    // adds (why: a locked account, a refused image address).
    const text = infos.length === 1 && b.error.message ? b.error.message : i.Message;
    return `${res.status}: ${text}${i.Resolution ? " " + i.Resolution : ""}`;
  }
  if (b.error && b.error.message) return `${res.status}: ${b.error.message}`;
  if (typeof b.error === "string") return res.status ? `${res.status}: ${b.error}` : b.error;
  return `${res.status}`;
}

// act runs a change and says how it went; the answer is returned.
async function act(what, method, path, body) {
  const res = await api(method, path, body);
  if (res.status >= 200 && res.status < 300) toast(`${what}: accepted (${res.status})`);
  else toast(`${what} refused: ${errorText(res)}`, true);
  return res;
}

// followTask watches the task of a 202 answer until it ends, then says how
// it ended (a media insert downloads first) and calls done.
async function followTask(res, what, done) {
  if (res.status !== 202) { if (done) done(); return; }
  const uri = (res.body && res.body["@odata.id"] && res.body["@odata.id"].includes("/TaskService/Tasks/")) ? res.body["@odata.id"] : null;
  if (!uri) { if (done) done(); return; }
  for (let i = 0; i < 7200; i++) {
    const r = await api("GET", uri);
    if (r.status !== 200) break;
    const st = r.body.TaskState;
    if (st !== "New" && st !== "Starting" && st !== "Running" && st !== "Pending") {
      const m = (r.body.Messages || []).map((x) => x.Message).join(" ");
      toast(`${what}: ${st}${m ? ": " + m : ""}`, st !== "Completed");
      break;
    }
    if (done && i === 0) done(); // show the insert as under way
    await new Promise((ok) => setTimeout(ok, 500));
  }
  if (done) done();
}

// ---- session ----

function forget() {
  state.token = ""; state.session = ""; state.me = null;
  sessionStorage.removeItem("vbmcd.token");
  sessionStorage.removeItem("vbmcd.session");
  stopLive();
}

async function logout() {
  leaveView();
  stopLive();
  if (state.session) { try { await api("DELETE", state.session); } catch (e) { /* gone already */ } }
  forget();
  showLogin("Logged out.");
}

function showLogin(msg) {
  leaveView();
  $("nav").replaceChildren();
  $("who").textContent = "";
  $("logout").hidden = true;
  const err = el("p", { id: "login-msg", class: "msg", text: msg || "" });
  const user = el("input", { id: "user", name: "user", autocomplete: "username", required: true });
  const pass = el("input", { id: "pass", name: "pass", type: "password", autocomplete: "current-password", required: true });
  const form = el("form", { id: "login", class: "card login" },
    el("h1", { text: "Log in to vbmcd" }),
    el("label", {}, "User", user),
    el("label", {}, "Password", pass),
    el("button", { type: "submit", id: "login-go" }, "Log in"), err);
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    err.textContent = "";
    const res = await api("POST", "/redfish/v1/SessionService/Sessions", { UserName: user.value, Password: pass.value });
    if (res.status !== 201) { err.textContent = "Login refused: " + errorText(res); return; }
    state.token = res.headers.get("X-Auth-Token");
    state.session = res.headers.get("Location") || (res.body && res.body["@odata.id"]) || "";
    sessionStorage.setItem("vbmcd.token", state.token);
    sessionStorage.setItem("vbmcd.session", state.session);
    pass.value = "";
    await start();
  });
  $("main").replaceChildren(form);
  user.focus();
}

async function start() {
  const res = await api("GET", "/ui/api/whoami");
  if (res.status !== 200) { forget(); showLogin(); return; }
  state.me = res.body;
  $("who").textContent = `${state.me.User} (${state.me.Role || "this system's user"})`;
  $("who").dataset.role = state.me.Role;
  $("logout").hidden = false;
  const nav = [el("a", { href: "#/systems", text: "Systems" })];
  if (state.me.ManageUsers) nav.push(el("a", { href: "#/accounts", text: "Accounts", id: "nav-accounts" }));
  $("nav").replaceChildren(...nav);
  startLive();
  route();
}

// ---- live rows: Server-Sent Events read with fetch (EventSource cannot
// send the token header) ----

function stopLive() {
  if (state.live) state.live.abort();
  state.live = null;
  $("live").className = "live";
}

function startLive() {
  stopLive();
  const ctl = new AbortController();
  state.live = ctl;
  (async () => {
    let backoff = 500, first = true;
    while (!ctl.signal.aborted && state.token) {
      try {
        const r = await fetch("/ui/api/live", { headers: { "X-Auth-Token": state.token }, signal: ctl.signal, cache: "no-store", credentials: "omit" });
        if (r.status === 401) { forget(); showLogin("Your session ended; log in again."); return; }
        if (!r.ok || !r.body) throw new Error("live: " + r.status);
        $("live").className = "live on";
        $("live").dataset.state = "on";
        // What changed while the stream was down was not sent: read the
        // view again.
        if (!first && state.onResync) state.onResync();
        first = false;
        backoff = 500;
        const rd = r.body.pipeThrough(new TextDecoderStream()).getReader();
        let buf = "";
        for (;;) {
          const { value, done } = await rd.read();
          if (done) break;
          buf += value;
          let i;
          while ((i = buf.indexOf("\n\n")) >= 0) {
            const block = buf.slice(0, i); buf = buf.slice(i + 2);
            let name = "message", data = "";
            for (const line of block.split("\n")) {
              if (line.startsWith("event: ")) name = line.slice(7);
              else if (line.startsWith("data: ")) data += line.slice(6);
            }
            if (name === "rows" && data && state.onRows) state.onRows(JSON.parse(data));
          }
        }
      } catch (e) {
        if (ctl.signal.aborted) return;
      }
      $("live").className = "live";
      $("live").dataset.state = "off";
      await new Promise((res) => setTimeout(res, backoff));
      backoff = Math.min(backoff * 2, 10000);
    }
  })();
}

// ---- routing ----

function leaveView() {
  if (state.leave) state.leave();
  state.leave = null;
  state.onRows = null;
  state.onResync = null;
}

function route() {
  if (!state.token) { showLogin(); return; }
  if (!state.me) { start(); return; }
  leaveView();
  const h = location.hash || "#/systems";
  const [path, query] = h.slice(1).split("?");
  const q = new URLSearchParams(query || "");
  const parts = path.split("/").filter(Boolean);
  if (parts[0] === "system" && parts[1]) systemView(decodeURIComponent(parts[1]));
  else if (parts[0] === "accounts") accountsView();
  else systemsView(parseInt(q.get("page") || "1", 10), q.get("q") || "");
}

// ---- the systems page ----

function powerBadge(p) { return el("span", { class: "badge power-" + p, "data-power": p, text: p }); }
function healthBadge(h, title) { return el("span", { class: "badge health-" + h, title: title || null, text: h }); }

function bootText(b) {
  if (!b || b.Enabled === "Disabled" || !b.Target || b.Target === "None") return `none (${(b && b.Mode) || "?"})`;
  return `${b.Target}, ${b.Enabled}, ${b.Mode}`;
}

function mediaText(media) {
  const ins = (media || []).filter((m) => m.Inserted);
  if (!ins.length) return "—";
  return ins.map((m) => `${m.Slot}: ${basename(m.Image) || "(inserted)"}${m.Task ? " [" + m.Task + "]" : ""}`).join("; ");
}

function basename(u) { if (!u) return ""; const s = u.split("?")[0].split("/"); return s[s.length - 1] || u; }

function fwText(f) { return f ? `BIOS ${f.BIOS} · BMC ${f.BMC} · NIC ${f.NIC}` : ""; }

function rowCells(r) {
  return [
    el("td", {}, el("a", { href: "#/system/" + encodeURIComponent(r.Id), class: "name", text: r.Name || r.Id })),
    el("td", {}, powerBadge(r.Power)),
    el("td", {}, healthBadge(r.Health, r.Problem)),
    el("td", { class: "boot", text: bootText(r.Boot) }),
    el("td", { class: "media", text: mediaText(r.Media) }),
    el("td", { class: "fw", text: fwText(r.Firmware) }),
    el("td", { class: "last", title: r.Last ? r.Last.Time : null, text: r.Last ? r.Last.Message : "" }),
  ];
}

function systemsView(pageNo, filter) {
  pageNo = Math.max(1, pageNo || 1);
  const tbody = el("tbody", { id: "rows" });
  const info = el("span", { id: "pageinfo", class: "muted" });
  const search = el("input", { id: "filter", type: "search", placeholder: "filter by name or UUID", value: filter });
  const prev = el("button", { type: "button", id: "prev", text: "‹ Previous" });
  const next = el("button", { type: "button", id: "next", text: "Next ›" });
  const go = (p, f) => { location.hash = `#/systems?page=${p}${f ? "&q=" + encodeURIComponent(f) : ""}`; };
  prev.addEventListener("click", () => go(pageNo - 1, filter));
  next.addEventListener("click", () => go(pageNo + 1, filter));
  let t;
  search.addEventListener("input", () => { clearTimeout(t); t = setTimeout(() => go(1, search.value.trim()), 300); });
  $("main").replaceChildren(el("section", { class: "card" },
    el("div", { class: "bar" }, el("h1", { text: "Systems" }), search, prev, info, next),
    el("table", { class: "systems" },
      el("thead", {}, el("tr", {}, ["Name", "Power", "Health", "Boot override", "Virtual media", "Firmware", "Last event"].map((h) => el("th", { text: h })))),
      tbody)));
  if (filter) { search.focus(); search.setSelectionRange(filter.length, filter.length); }
  const rows = new Map();
  state.onRows = (changed) => {
    for (const r of changed) {
      const tr = rows.get(r.Id);
      if (!tr) continue;
      if (r.Removed) { tr.classList.add("removed"); continue; }
      tr.replaceChildren(...rowCells(r));
      tr.dataset.power = r.Power;
    }
  };
  const load = async () => {
    const res = await api("GET", `/ui/api/systems?skip=${(pageNo - 1) * PAGE}&top=${PAGE}${filter ? "&q=" + encodeURIComponent(filter) : ""}`);
    if (res.status !== 200) { toast("Systems: " + errorText(res), true); return; }
    const p = res.body;
    for (const r of p.Rows) {
      const tr = el("tr", { "data-id": r.Id, "data-power": r.Power }, rowCells(r));
      rows.set(r.Id, tr);
      tbody.append(tr);
    }
    const pages = Math.max(1, Math.ceil(p.Total / PAGE));
    info.textContent = p.Total ? `${p.Skip + 1}–${p.Skip + p.Rows.length} of ${p.Total} · page ${pageNo} of ${pages}` : "no systems";
    prev.disabled = pageNo <= 1;
    next.disabled = pageNo >= pages;
    tbody.dataset.loaded = "1";
  };
  state.onResync = () => { rows.clear(); tbody.replaceChildren(); load(); };
  load();
}

// ---- one system ----

function section(title, id, ...kids) {
  return el("section", { class: "card", id }, el("h2", { text: title }), ...kids);
}

function systemView(id) {
  const sys = "/redfish/v1/Systems/" + encodeURIComponent(id);
  const mgr = "/redfish/v1/Managers/" + encodeURIComponent(id);
  const operate = state.me.Operate;
  const denied = operate ? null : "Your role (" + (state.me.Role || "?") + ") may look, not act.";
  const title = el("h1", { id: "sys-name", text: id });
  const power = el("span", { id: "sys-power" });
  const health = el("span", { id: "sys-health" });
  const result = el("p", { id: "action-result", class: "msg", role: "status" });

  const buttons = RESETS.map((rt) => el("button", {
    type: "button", class: "reset" + (rt === "On" ? " primary" : rt.startsWith("Force") ? " danger" : ""),
    id: "reset-" + rt, "data-reset": rt, disabled: !operate, title: denied,
    onclick: async () => {
      const res = await act(rt, "POST", sys + "/Actions/ComputerSystem.Reset", { ResetType: rt });
      result.textContent = res.status < 300 ? `${rt}: accepted (${res.status})` : `${rt}: ${errorText(res)}`;
      result.className = "msg " + (res.status < 300 ? "good" : "bad");
    },
  }, rt));

  const target = el("select", { id: "boot-target", disabled: !operate });
  const enabled = el("select", { id: "boot-enabled", disabled: !operate });
  const mode = el("select", { id: "boot-mode", disabled: !operate });
  const bootNow = el("p", { id: "boot-now", class: "muted" });
  const bootApply = el("button", { type: "button", id: "boot-apply", disabled: !operate, title: denied, text: "Set boot override",
    onclick: () => {
      const boot = { BootSourceOverrideTarget: target.value, BootSourceOverrideEnabled: enabled.value, BootSourceOverrideMode: mode.value };
      for (const sel of [target, enabled, mode]) delete sel.dataset.dirty;
      act("Boot override", "PATCH", sys, { Boot: boot }).then(loadSystem);
    } });

  const mediaBox = el("div", { id: "media" });
  const biosBox = el("div", { id: "bios" });
  const fwBox = el("div", { id: "firmware" });
  const logBox = el("ol", { id: "eventlog", class: "log" });
  const conStatus = el("span", { id: "console-status", class: "muted" });
  const termBox = el("div", { id: "terminal", class: "terminal" });
  const kvmStatus = el("span", { id: "display-status", class: "muted" });
  const kvmBox = el("div", { id: "display", class: "display" });

  $("main").replaceChildren(
    el("div", { class: "bar" }, el("a", { href: "#/systems", text: "‹ Systems" }), title, power, health),
    el("div", { class: "grid" },
      el("div", {},
        section("Power", "power", el("div", { class: "buttons" }, buttons), result, denied && el("p", { class: "muted", id: "readonly-note", text: denied })),
        section("Boot override", "boot", bootNow,
          el("div", { class: "form" }, el("label", {}, "Target", target), el("label", {}, "Lasts", enabled), el("label", {}, "Mode", mode), bootApply)),
        section("Virtual media", "vmedia", mediaBox),
        section("BIOS settings", "bios-sec", biosBox),
        section("Firmware", "fw-sec", fwBox),
        section("Event log", "events", logBox)),
      el("div", {},
        section("Serial console", "console", el("p", {}, conStatus), termBox),
        section("Graphical console", "kvm", el("p", {}, kvmStatus), kvmBox))));

  // A live update refreshes the selects, except one the user changed and
  // has not applied yet.
  function fill(sel, values, cur) {
    if (sel.dataset.dirty) return;
    sel.replaceChildren(...values.map((v) => el("option", { value: v, selected: v === cur, text: v })));
  }
  for (const sel of [target, enabled, mode]) sel.addEventListener("change", () => { sel.dataset.dirty = "1"; });

  async function loadSystem() {
    const res = await api("GET", sys);
    if (res.status !== 200) { toast("System: " + errorText(res), true); return; }
    const s = res.body;
    title.textContent = s.Name || s.Id;
    power.replaceChildren(powerBadge(s.PowerState));
    const st = s.Status || {};
    const cond = (st.Conditions || []).map((c) => c.Message).join("; ");
    health.replaceChildren(healthBadge(st.Health || "OK", cond));
    const b = s.Boot || {};
    fill(target, b["BootSourceOverrideTarget@Redfish.AllowableValues"] || [b.BootSourceOverrideTarget], b.BootSourceOverrideTarget);
    fill(enabled, b["BootSourceOverrideEnabled@Redfish.AllowableValues"] || ["Disabled", "Once", "Continuous"], b.BootSourceOverrideEnabled);
    fill(mode, b["BootSourceOverrideMode@Redfish.AllowableValues"] || ["UEFI", "Legacy"], b.BootSourceOverrideMode);
    bootNow.textContent = `Now: ${bootText({ Target: b.BootSourceOverrideTarget, Enabled: b.BootSourceOverrideEnabled, Mode: b.BootSourceOverrideMode })}`;
  }

  // Media members are made once and updated in place, so that a live
  // update does not wipe a URL being typed.
  const members = new Map();
  async function loadMedia() {
    const res = await api("GET", mgr + "/VirtualMedia");
    if (res.status !== 200) { mediaBox.textContent = errorText(res); return; }
    const items = await Promise.all((res.body.Members || []).map((m) => api("GET", m["@odata.id"])));
    for (const r of items) {
      if (r.status !== 200) continue;
      const v = r.body;
      const acts = v["Actions"] || {};
      const ins = acts["#VirtualMedia.InsertMedia"], ej = acts["#VirtualMedia.EjectMedia"];
      let m = members.get(v.Id);
      if (!m) {
        m = {
          state: el("p", { class: "media-state" }),
          url: el("input", { type: "url", class: "media-url", placeholder: "http://…/image.iso", disabled: !operate, "data-slot": v.Id }),
        };
        m.insert = el("button", { type: "button", class: "insert", disabled: !operate || !ins, title: denied, text: "Insert",
          onclick: () => act("Insert " + v.Id, "POST", ins.target, { Image: m.url.value, Inserted: true, WriteProtected: true })
            .then((res) => followTask(res, "Insert " + v.Id, loadMedia)) });
        m.eject = el("button", { type: "button", class: "eject", title: denied, text: "Eject",
          onclick: () => act("Eject " + v.Id, "POST", ej.target, {}).then(loadMedia) });
        members.set(v.Id, m);
        mediaBox.append(el("div", { class: "media-item", "data-slot": v.Id },
          el("strong", { text: v.Id + " " }), el("span", { class: "muted", text: (v.MediaTypes || []).join(", ") }),
          m.state, el("div", { class: "form" }, m.url, m.insert, m.eject)));
      }
      m.state.textContent = v.Inserted ? `Inserted: ${v.Image}` : "Empty";
      m.eject.disabled = !operate || !ej || !v.Inserted;
    }
  }

  async function loadBios() {
    const [cur, pend] = await Promise.all([api("GET", sys + "/Bios"), api("GET", sys + "/Bios/Settings")]);
    if (cur.status !== 200) { biosBox.textContent = errorText(cur); return; }
    const a = cur.body.Attributes || {}, p = (pend.body && pend.body.Attributes) || {};
    const keys = Object.keys(a).sort();
    const pending = Object.keys(p).filter((k) => JSON.stringify(p[k]) !== JSON.stringify(a[k]));
    biosBox.replaceChildren(
      el("p", { class: pending.length ? "msg warn" : "muted", id: "bios-pending",
        text: pending.length ? `${pending.length} setting(s) pending until the next reset` : "No pending settings" }),
      el("table", { class: "kv" }, el("tbody", {}, keys.map((k) => el("tr", { class: pending.includes(k) ? "pending" : null },
        el("th", { text: k }), el("td", { text: String(a[k]) }),
        el("td", { text: pending.includes(k) ? "→ " + String(p[k]) : "" }))))));
  }

  async function loadFirmware() {
    const comps = ["BIOS", "BMC", "NIC"];
    const items = await Promise.all(comps.map((c) => api("GET", "/redfish/v1/UpdateService/FirmwareInventory/" + c + "-" + encodeURIComponent(id))));
    fwBox.replaceChildren(el("table", { class: "kv" }, el("tbody", {}, items.map((r, i) => el("tr", {},
      el("th", { text: comps[i] }), el("td", { text: r.status === 200 ? r.body.Version : errorText(r) }),
      el("td", { class: "muted", text: r.status === 200 && r.body.Updateable ? "updateable" : "" }))))));
  }

  async function loadLog() {
    const res = await api("GET", "/ui/api/systems/" + encodeURIComponent(id) + "/events");
    if (res.status !== 200) return;
    logBox.replaceChildren(...(res.body.length ? res.body.map((e) => el("li", { class: "sev-" + e.Severity },
      el("time", { text: e.Time.replace("T", " ").replace("Z", "") }), " ", e.Message)) : [el("li", { class: "muted", text: "No events since vbmcd started." })]));
  }

  loadSystem(); loadMedia(); loadBios(); loadFirmware(); loadLog();
  let pendingReload;
  state.onRows = (rows) => {
    for (const r of rows) {
      if (r.Id !== id || r.Removed) continue;
      power.replaceChildren(powerBadge(r.Power));
      health.replaceChildren(healthBadge(r.Health, r.Problem));
      if (state.onPower) state.onPower(r.Power);
      clearTimeout(pendingReload);
      pendingReload = setTimeout(() => { loadSystem(); loadMedia(); loadBios(); loadLog(); }, 100);
    }
  };
  state.onResync = () => { loadSystem(); loadMedia(); loadBios(); loadFirmware(); loadLog(); };
  const con = openConsole(id, termBox, conStatus);
  const kvm = openDisplay(id, kvmBox, kvmStatus);
  state.onPower = (p) => kvm.power(p);
  state.leave = () => { clearTimeout(pendingReload); con.close(); kvm.close(); state.onPower = null; };
}

// openConsole shows the serial console of system id in box: xterm.js over
// the websocket, which is sent the session token first.
function openConsole(id, box, status) {
  let ws = null, closed = false, retry = null;
  if (!state.me.Console || !state.me.Operate) {
    box.hidden = true;
    status.textContent = !state.me.Console ? "This backend's machines have no serial console."
      : "The serial console needs the Operator or Administrator role (as IPMI's SOL does); your role is " + (state.me.Role || "?") + ".";
    status.className = "muted";
    return { close() {} };
  }
  const term = new window.Terminal({ convertEol: false, cursorBlink: true, scrollback: 5000, fontSize: 14,
    theme: { background: "#111417", foreground: "#d8dee4" } });
  const fit = new window.FitAddon.FitAddon();
  term.loadAddon(fit);
  term.open(box);
  fit.fit();
  const onResize = () => fit.fit();
  window.addEventListener("resize", onResize);
  const enc = new TextEncoder();
  term.onData((d) => { if (ws && ws.readyState === WebSocket.OPEN) ws.send(enc.encode(d)); });
  box.dataset.text = "";
  const dec = new TextDecoder();
  const takeBtn = el("button", { type: "button", id: "console-take", hidden: true, text: "Take the console back",
    onclick: () => { if (ws && ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify({ Take: true })); takeBtn.hidden = true; } });
  status.after(takeBtn);
  function say(s, cls) { status.textContent = s; status.className = cls || "muted"; status.dataset.state = cls || ""; }
  function connect() {
    const proto = location.protocol === "https:" ? "wss:" : "ws:";
    ws = new WebSocket(`${proto}//${location.host}/ui/console/${encodeURIComponent(id)}`);
    ws.binaryType = "arraybuffer";
    say("connecting…");
    ws.onopen = () => ws.send(JSON.stringify({ Token: state.token }));
    ws.onmessage = (ev) => {
      if (typeof ev.data === "string") {
        const m = JSON.parse(ev.data);
        if (m.error) say(`${m.error}${m.detail ? ": " + m.detail : ""}`, "bad");
        else if (m.status === "connected") say("connected", "good");
        else say(`${m.status}${m.detail ? ": " + m.detail : ""}`, "warn");
        takeBtn.hidden = m.status !== "taken";
        return;
      }
      const b = new Uint8Array(ev.data);
      term.write(b);
      // What the console printed, for tests and screen readers' sake.
      box.dataset.text = (box.dataset.text + dec.decode(b, { stream: true })).slice(-16384);
    };
    ws.onclose = (ev) => {
      if (closed) return;
      if (ev.code === 1008) return; // refused: the message says why
      say("disconnected; reconnecting…", "warn");
      retry = setTimeout(connect, 2000);
    };
  }
  connect();
  return { close() { closed = true; clearTimeout(retry); if (ws) ws.close(); window.removeEventListener("resize", onResize); term.dispose(); takeBtn.remove(); } };
}

// openDisplay shows the screen of system id in box: noVNC's RFB over the
// websocket, which is sent the session token first and answers
// {"status":"connected"} before the display's RFB starts. The display ends
// when the machine stops; the page connects again when it runs.
function openDisplay(id, box, status) {
  let ws = null, rfb = null, closed = false, retry = null;
  function say(s, cls) { status.textContent = s; status.className = cls || "muted"; status.dataset.state = cls || ""; }
  if (!state.me.Display || !state.me.Operate) {
    box.hidden = true;
    say(!state.me.Display ? "This backend's machines have no graphical console."
      : "The graphical console needs the Operator or Administrator role, as the serial console does; your role is " + (state.me.Role || "?") + ".");
    return { close() {}, power() {} };
  }
  function connect() {
    if (closed || ws) return;
    if (!window.RFB) { window.addEventListener("rfb-ready", connect, { once: true }); return; }
    const proto = location.protocol === "https:" ? "wss:" : "ws:";
    const sock = new WebSocket(`${proto}//${location.host}/ui/display/${encodeURIComponent(id)}`);
    ws = sock;
    sock.binaryType = "arraybuffer";
    say("connecting…");
    let refused = false;
    sock.onopen = () => sock.send(JSON.stringify({ Token: state.token }));
    // Text messages are vbmcd's: "connected" first, then only why it
    // closes. RFB takes the socket's onmessage over; this listener stays.
    sock.addEventListener("message", (ev) => {
      if (typeof ev.data !== "string") return;
      const m = JSON.parse(ev.data);
      if (m.error) { refused = true; say(`${m.error}${m.detail ? ": " + m.detail : ""}`, "bad"); return; }
      if (m.status !== "connected" || rfb) return;
      rfb = new window.RFB(box, sock, { shared: true });
      rfb.scaleViewport = true;
      rfb.focusOnClick = true;
      rfb.addEventListener("connect", () => { say("connected", "good"); box.dataset.connected = "1"; });
      say("connected", "good");
    });
    sock.addEventListener("close", (ev) => {
      if (ws !== sock) return;
      ws = null;
      rfb = null;
      delete box.dataset.connected;
      // Refused, or no display (the machine is off or stopped): the
      // message says why, and the next power-on connects again.
      if (closed || refused || ev.code === 1008) return;
      say("disconnected; reconnecting…", "warn");
      retry = setTimeout(connect, 2000);
    });
  }
  connect();
  return {
    close() { closed = true; clearTimeout(retry); if (rfb) rfb.disconnect(); else if (ws) ws.close(); },
    power(p) { if (p === "On" && !ws && !closed) { clearTimeout(retry); connect(); } },
  };
}

// ---- accounts (Administrator) ----

function accountsView() {
  const base = "/redfish/v1/AccountService/Accounts";
  const list = el("tbody", { id: "accounts" });
  const user = el("input", { id: "new-user", placeholder: "user name", autocomplete: "off" });
  const pass = el("input", { id: "new-pass", type: "password", placeholder: "password", autocomplete: "new-password" });
  const role = el("select", { id: "new-role" }, ["ReadOnly", "Operator", "Administrator"].map((r) => el("option", { value: r, text: r })));
  const add = el("button", { type: "button", id: "new-add", text: "Add account", onclick: async () => {
    const res = await act("Add " + user.value, "POST", base, { UserName: user.value, Password: pass.value, RoleId: role.value, Enabled: true });
    if (res.status < 300) { user.value = ""; pass.value = ""; load(); }
  } });
  $("main").replaceChildren(section("Accounts", "accounts-sec",
    el("table", { class: "systems" }, el("thead", {}, el("tr", {}, ["User", "Role", "Enabled", "Locked", "Bound to", ""].map((h) => el("th", { text: h })))), list),
    el("div", { class: "form" }, user, pass, role, add)));
  async function load() {
    const res = await api("GET", base);
    if (res.status !== 200) { toast("Accounts: " + errorText(res), true); return; }
    const items = await Promise.all((res.body.Members || []).map((m) => api("GET", m["@odata.id"])));
    list.replaceChildren(...items.filter((r) => r.status === 200).map((r) => {
      const a = r.body;
      const sys = (a.Links && a.Links.Systems || []).map((s) => basename(s["@odata.id"])).join(", ");
      return el("tr", {}, el("td", { text: a.UserName }), el("td", { text: a.RoleId }), el("td", { text: a.Enabled ? "yes" : "no" }),
        el("td", { text: a.Locked ? "yes" : "no" }), el("td", { text: sys || "all systems" }),
        el("td", {}, el("button", { type: "button", class: "danger", text: "Delete",
          onclick: () => act("Delete " + a.UserName, "DELETE", a["@odata.id"]).then(load) })));
    }));
  }
  load();
}

// ---- start ----

window.addEventListener("hashchange", route);
document.addEventListener("DOMContentLoaded", () => {
  $("logout").addEventListener("click", logout);
  route();
});
