// The Swiftplex bot host's dashboard: plain JavaScript over the admin API (no build step).
// The token is asked for once and kept in this tab's sessionStorage; every call sends it as
// `Authorization: Bearer`, and the event WebSocket (which cannot set headers) as `?token=`.
// A host with several bots (`bots:`) shows a bot selector: the cards about chats (address,
// requests, contacts, groups, command, events) show the chosen bot; the plugins card shows every
// bot's plugins with their bot.
"use strict";

const TOKEN_KEY = "swiftplex.adminToken";
const $ = (id) => document.getElementById(id);
let events = null;
let refreshTimer = null;
let bot = null;  // the chosen bot's name; null until /api/bots has answered

function token() { return sessionStorage.getItem(TOKEN_KEY); }

// `path` for the chosen bot: `?bot=` added (the first bot is the default, so a one-bot host
// gets the same answers either way).
function forBot(path, name) {
  const b = name === undefined ? bot : name;
  return b === null ? path : path + (path.includes("?") ? "&" : "?") + "bot=" + encodeURIComponent(b);
}

class Unauthorized extends Error {}

async function api(method, path, body) {
  const headers = { "Authorization": "Bearer " + token() };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const r = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  if (r.status === 401) throw new Unauthorized("the token was refused");
  const type = r.headers.get("Content-Type") || "";
  const value = type.startsWith("application/json") ? await r.json() : await r.blob();
  if (!r.ok) {
    const e = value && value.error ? value.error : { type: "http", message: String(r.status) };
    throw new Error(e.type + ": " + e.message);
  }
  return value;
}

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v; else if (k.startsWith("on")) e.addEventListener(k.slice(2), v); else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

function showLogin(message) {
  if (events) { events.close(); events = null; }
  if (refreshTimer) { clearInterval(refreshTimer); refreshTimer = null; }
  $("main").hidden = true;
  $("logout").hidden = true;
  $("login-panel").hidden = false;
  $("login-error").hidden = !message;
  $("login-error").textContent = message || "";
}

async function signIn() {
  try {
    await refreshStatus();
    await refreshBots();
  } catch (e) {
    sessionStorage.removeItem(TOKEN_KEY);
    showLogin(e instanceof Unauthorized ? "That token was refused." : "Cannot reach the host: " + e.message);
    return;
  }
  $("login-panel").hidden = true;
  $("main").hidden = false;
  $("logout").hidden = false;
  await Promise.all([refreshPlugins(), refreshRequests(), refreshContacts(), refreshGroups(), refreshChannels(), refreshAddress()].map(guard));
  openEvents();
  refreshTimer = setInterval(() => { guard(refreshStatus()); guard(refreshPlugins()); }, 5000);
}

// Runs a refresh; a refused token returns to the sign-in form, other failures are shown.
async function guard(p) {
  try { await p; } catch (e) {
    if (e instanceof Unauthorized) { sessionStorage.removeItem(TOKEN_KEY); showLogin("The token was refused (rotated?)."); }
    else logLine("error", e.message);
  }
}

// The bot selector: shown when the host has more than one bot.
async function refreshBots() {
  const { bots } = await api("GET", "/api/bots");
  if (bot === null || !bots.some((b) => b.name === bot)) bot = bots.length ? bots[0].name : null;
  $("bot-select").replaceChildren(...bots.map((b) => el("option", { value: b.name }, b.name + " (" + b.displayName + ")")));
  $("bot-select").value = bot;
  $("bot-choice").hidden = bots.length < 2;
  for (const e of document.querySelectorAll(".bot-name")) e.textContent = bots.length < 2 ? "" : "· " + bot;
}

async function chooseBot(name) {
  bot = name;
  for (const e of document.querySelectorAll(".bot-name")) e.textContent = "· " + bot;
  if (events) { events.onclose = null; events.close(); events = null; }
  // Not live again until the chosen bot's stream is open.
  $("events-state").textContent = "connecting"; $("events-state").className = "pill";
  $("events").replaceChildren();
  await Promise.all([refreshRequests(), refreshContacts(), refreshGroups(), refreshChannels(), refreshAddress()].map(guard));
  openEvents();
}

async function refreshStatus() {
  const [s, ready] = await Promise.all([api("GET", "/api/status"), fetch("/readyz", { headers: { "Authorization": "Bearer " + token() } }).then((r) => r.json())]);
  const rows = [
    ["Engine", s.engineRunning ? "running" : "stopped"],
    ["Ready", ready.ready ? "yes" : "no" + ((ready.relaysDown || []).length ? " (relays down: " + ready.relaysDown.join(", ") + ")" : "")],
    ["Relays connected", s.relaysConnected + " of " + s.relays.length + (s.embeddedRelay ? " (embedded)" : "")],
    ["Relays", s.relays.join(", ")],
    ["Uptime", s.uptimeSeconds + " s"],
    ["Version", s.version],
    ["Plugins", s.plugins],
    ["Refused admin calls", s.authFailures],
  ];
  if (s.bots && s.bots.length > 1) {
    // Several bots: each engine's own relay connections, and every bot's plugins.
    rows.splice(1, 0, ["Bots", s.bots.map((b) => b.name + (b.engineRunning ? "" : " (stopped)")).join(", ")]);
    rows.find((r) => r[0] === "Relays connected")[1] = s.bots.map((b) => b.name + ": " + b.relaysConnected).join(", ")
      + " of " + s.relays.length + (s.embeddedRelay ? " (embedded)" : "");
    rows.find((r) => r[0] === "Plugins")[1] = s.bots.reduce((n, b) => n + b.plugins, 0);
  }
  $("status").replaceChildren(...rows.flatMap(([k, v]) => [el("dt", {}, k), el("dd", { "data-key": k }, v)]));
  const ok = s.engineRunning && ready.ready;
  $("status-line").replaceChildren(el("span", { class: "pill " + (ok ? "ok" : "bad"), id: "ready-pill" }, ok ? "ready" : "not ready"),
    " ", (s.bots && s.bots.length > 1 ? s.bots.length + " bots · " : "") + ready.relaysConnected + " relay(s) connected · up " + s.uptimeSeconds + " s");
}

async function refreshPlugins() {
  const { plugins } = await api("GET", "/api/plugins");
  $("plugins").tBodies[0].replaceChildren(...plugins.map((p) => el("tr", { "data-instance": p.name, "data-bot": p.bot },
    el("td", {}, p.bot), el("td", {}, p.name), el("td", {}, p.plugin + " " + p.version), el("td", {}, p.isolation),
    el("td", {}, el("span", { class: "pill state-" + p.state }, p.state)),
    el("td", { class: "num" }, p.queueDepth), el("td", { class: "num handled" }, p.counters.handled),
    el("td", { class: "num" }, p.counters.errors), el("td", { class: "num" }, p.counters.timeouts),
    el("td", { class: "num" }, p.counters.restarts),
    el("td", {}, el("button", { class: "reload", onclick: () => guard(reload(p.name, p.bot)) }, "Reload")))));
}

// Reloads one instance of a bot, or (no name) every bot's plugins.
async function reload(name, ofBot) {
  $("reload-result").textContent = "reloading " + (name ? ofBot + "/" + name : "all") + "…";
  const path = name ? forBot("/api/plugins/" + encodeURIComponent(name) + "/reload", ofBot) : "/api/plugins/reload";
  const { results } = await api("POST", path);
  $("reload-result").replaceChildren(...results.map((r) =>
    el("span", { class: "pill " + (r.failed ? "bad" : "ok"), "data-outcome": r.outcome, "data-instance": r.name, "data-bot": r.bot },
      r.bot + "/" + r.name + ": " + r.outcome)));
  await refreshPlugins();
}

async function refreshRequests() {
  const { contactRequests } = await api("GET", forBot("/api/contact-requests?limit=100"));
  $("requests").replaceChildren(...(contactRequests.length ? contactRequests.map((r) => el("li", { "data-request": r.contactRequestId },
    el("span", { class: "name" }, r.localDisplayName),
    el("button", { class: "accept", onclick: () => guard(answer(r.contactRequestId, "accept")) }, "Accept"),
    el("button", { class: "reject", onclick: () => guard(answer(r.contactRequestId, "reject")) }, "Reject")))
    : [el("li", { class: "muted" }, "none waiting")]));
}

async function answer(id, verb) {
  await api("POST", forBot("/api/contact-requests/" + id + "/" + verb));
  await Promise.all([refreshRequests(), refreshContacts()]);
}

async function refreshContacts() {
  const { contacts, total } = await api("GET", forBot("/api/contacts?limit=100"));
  $("contacts").replaceChildren(...(contacts.length ? contacts.map((c) => el("li", { "data-contact": c.contactId },
    el("span", { class: "name" }, c.localDisplayName), el("span", { class: "muted" }, "#" + c.contactId + " · " + c.contactStatus)))
    : [el("li", { class: "muted" }, "no contacts yet")]));
  if (total > contacts.length) $("contacts").append(el("li", { class: "muted" }, (total - contacts.length) + " more"));
}

// Each group with its members (name, role, state), from the admin API. Channels (groups with
// `useRelays`) have their own card.
async function refreshGroups() {
  const answer = await api("GET", forBot("/api/groups?limit=100"));
  const groups = answer.groups.filter((g) => !g.useRelays);
  const total = answer.total - (answer.groups.length - groups.length);
  const items = await Promise.all(groups.map(async (g) => {
    const { members } = await api("GET", forBot("/api/groups/" + g.groupId + "/members"));
    return el("li", { "data-group": g.groupId },
      el("span", { class: "name" }, g.groupProfile.displayName),
      el("span", { class: "muted" }, "#" + g.groupId + " · you: " + g.membership.memberRole + " · " + members.length + " member(s)"),
      el("ul", { class: "members" }, ...members.map((m) => el("li", { "data-member": m.groupMemberId },
        m.localDisplayName + " (" + m.memberRole + ", " + m.memberStatus + ")"))));
  }));
  $("groups").replaceChildren(...(items.length ? items : [el("li", { class: "muted" }, "no groups yet")]));
  if (total > groups.length) $("groups").append(el("li", { class: "muted" }, (total - groups.length) + " more"));
}

// A relay status's colour, as SimpleX's apps show it (relayStatusIndicator): green when active,
// orange on the way there (new, invited, accepted, acknowledgedRoster), red when it no longer
// serves (inactive, rejected).
function relayColour(status) {
  if (status === "active") return "relay-ok";
  if (status === "inactive" || status === "rejected") return "relay-bad";
  return "relay-warn";
}

// SimpleX's status texts (RelayStatus.text).
const RELAY_STATUS_TEXT = { new: "New", invited: "Invited", accepted: "Accepted", acknowledgedRoster: "Accepted",
  active: "Active", inactive: "Inactive", rejected: "Rejected" };

// A relay's name: its profile's display name, else its address's host.
function relayName(r) {
  const c = r.userChatRelay || {};
  if (c.relayProfile && c.relayProfile.displayName) return c.relayProfile.displayName;
  try { return new URL(c.address).host || "relay " + c.chatRelayId; } catch { return "relay " + c.chatRelayId; }
}

function statusView(status) {
  return [el("span", { class: "dot " + relayColour(status) }),
    el("span", { class: "status " + relayColour(status) }, RELAY_STATUS_TEXT[status] || status)];
}

// Each channel with the bot's role in it; the owner's relays each with its status (a coloured
// dot and the status text), a relay's own status.
async function refreshChannels() {
  const { channels, total } = await api("GET", forBot("/api/channels?limit=100"));
  const items = channels.map((c) => {
    const g = c.groupInfo;
    const li = el("li", { "data-channel": g.groupId, "data-role": c.role }, el("span", { class: "name" }, g.groupProfile.displayName));
    if (c.role === "owner") {
      const relays = c.relays || [];
      const active = relays.filter((r) => r.relayStatus === "active").length;
      li.append(el("span", { class: "muted" }, "#" + g.groupId + " · you: owner · " + active + " of " + relays.length + " relay(s) active"));
      if (c.relaysError) li.append(el("span", { class: "error" }, c.relaysError));
      li.append(el("ul", { class: "relays" }, ...relays.map((r) => el("li", { "data-relay": r.groupRelayId, "data-status": r.relayStatus },
        ...statusView(r.relayStatus), " ", el("span", { class: "relay-name" }, relayName(r))))));
    } else if (c.role === "relay") {
      const own = g.relayOwnStatus || "new";
      li.append(el("span", { class: "muted" }, "#" + g.groupId + " · you: relay · "), ...statusView(own));
    } else {
      li.append(el("span", { class: "muted" }, "#" + g.groupId + " · you: subscriber · " + g.membership.memberStatus));
    }
    return li;
  });
  $("channels").replaceChildren(...(items.length ? items : [el("li", { class: "muted" }, "no channels yet")]));
  if (total > channels.length) $("channels").append(el("li", { class: "muted" }, (total - channels.length) + " more"));
}

async function refreshAddress() {
  let address;
  try { address = await api("GET", forBot("/api/address")); } catch (e) {
    if (e instanceof Unauthorized) throw e;
    $("address-link").textContent = "no address (" + e.message + ")";
    return;
  }
  $("address-link").textContent = address.link;
  const svg = await api("GET", address.qrSvg);
  $("address-qr").src = URL.createObjectURL(svg);
}

function logLine(type, text) {
  const list = $("events");
  list.prepend(el("li", { "data-type": type }, new Date().toLocaleTimeString() + "  " + type + (text ? "  " + text : "")));
  while (list.children.length > 200) list.lastChild.remove();
}

// What an event says, without message texts: its type, and whom it is about.
function summary(e) {
  const who = (e.contact && e.contact.localDisplayName) || (e.contactRequest && e.contactRequest.localDisplayName)
    || (e.groupInfo && e.groupInfo.groupProfile && "#" + e.groupInfo.groupProfile.displayName) || "";
  const items = Array.isArray(e.chatItems) ? e.chatItems.length + " item(s)" : "";
  const relay = e.groupRelay ? "relay " + relayName(e.groupRelay) + ": " + e.groupRelay.relayStatus : "";
  return [who, items, relay, e.transportHost || ""].filter(Boolean).join(" · ");
}

// Events after which the groups card is read again.
const GROUP_EVENTS = ["groupCreated", "userJoinedGroup", "joinedGroupMember", "connectedToGroupMember", "memberRole",
  "memberBlockedForAll", "deletedMember", "deletedMemberUser", "leftMember", "groupDeleted", "groupUpdated", "receivedGroupInvitation"];

// Events after which the channels card is read again (as well as GROUP_EVENTS).
const CHANNEL_EVENTS = ["groupRelayUpdated", "groupLinkDataUpdated"];

function openEvents() {
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  events = new WebSocket(scheme + "//" + location.host + forBot("/api/events?token=" + encodeURIComponent(token())));
  const state = $("events-state");
  events.onopen = () => { state.textContent = "live"; state.className = "pill ok"; };
  events.onclose = () => {
    state.textContent = "closed"; state.className = "pill bad";
    if (token() && !$("main").hidden) setTimeout(() => { if (token() && !$("main").hidden) openEvents(); }, 2000);
  };
  events.onmessage = (m) => {
    let e;
    try { e = JSON.parse(m.data); } catch { return; }
    logLine(e.type, summary(e));
    if (["receivedContactRequest", "contactRequestRejected", "acceptingContactRequest"].includes(e.type)) guard(refreshRequests());
    if (["contactConnected", "contactDeletedByContact", "contactUpdated", "acceptingContactRequest"].includes(e.type)) guard(refreshContacts());
    if (e.type === "hostConnected" || e.type === "hostDisconnected") guard(refreshStatus());
    if (GROUP_EVENTS.includes(e.type)) { guard(refreshGroups()); guard(refreshChannels()); }
    if (CHANNEL_EVENTS.includes(e.type)) guard(refreshChannels());
  };
}

document.addEventListener("DOMContentLoaded", () => {
  $("login-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, $("token").value.trim());
    $("token").value = "";
    signIn();
  });
  $("logout").addEventListener("click", () => { sessionStorage.removeItem(TOKEN_KEY); showLogin(); });
  $("reload-all").addEventListener("click", () => guard(reload(null)));
  $("bot-select").addEventListener("change", () => guard(chooseBot($("bot-select").value)));
  $("command-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const out = $("command-output");
    out.textContent = "…";
    try { out.textContent = JSON.stringify(await api("POST", forBot("/api/command"), { cmd: $("command").value }), null, 2); }
    catch (e) { out.textContent = e.message; if (e instanceof Unauthorized) showLogin("The token was refused."); return; }
    guard(refreshGroups());  // a command may have made or changed a group or a channel (responses are not events)
    guard(refreshChannels());
  });
  if (token()) signIn(); else showLogin();
});
