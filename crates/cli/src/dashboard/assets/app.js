// The leasehold dashboard: one EventSource (/events, with ?group= for the group on
// screen), rendered with DOM calls only (every name from Redis goes in as text).
"use strict";

const PAGE = 1024;        // partition cells per page of the map
const LABELLED = 64;      // up to this many partitions, cells show their names
const MOVES_SHOWN = 500;  // moves kept on the page

const $ = (id) => document.getElementById(id);

const state = {
  overview: null,     // the last `overview` event
  overviewAt: 0,      // when it came (Date.now())
  group: null,        // the selected group's name
  head: null,         // its last `group` event, without partitions and moves
  headAt: 0,
  partitions: [],     // its partitions (sent only when they change)
  moves: [],          // its moves, oldest first
  mapPage: 0,
  source: null,
};

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") e.className = v;
    else if (k === "style") e.style.cssText = v;
    else if (k.startsWith("data-")) e.setAttribute(k, v);
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const c of children) {
    if (c === null || c === undefined) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

function replace(node, ...children) {
  node.replaceChildren(...children.filter((c) => c !== null && c !== undefined));
}

// A colour per replica id: a hue from its name, moved on by the golden angle while it
// is too close to one already given (so four replicas never share a colour). Given in
// the order of the ids sorted (`assignColours`), the same replicas get the same colours
// on every page and every reload.
const colours = new Map();
const hues = [];
function hueDistance(a, b) {
  const d = Math.abs(a - b) % 360;
  return Math.min(d, 360 - d);
}
function assignColours(ids) {
  for (const id of [...new Set(ids)].filter(Boolean).sort()) {
    if (colours.has(id)) continue;
    let h = 2166136261;
    for (let i = 0; i < id.length; i++) h = Math.imul(h ^ id.charCodeAt(i), 16777619);
    let hue = (h >>> 0) % 360;
    // Tighter as more replicas share the wheel.
    const apart = Math.max(12, Math.min(48, 240 / (hues.length + 1)));
    for (let tries = 0; tries < 24 && hues.some((u) => hueDistance(u, hue) < apart); tries++) {
      hue = (hue + 137.508) % 360;
    }
    hues.push(hue);
    colours.set(id, `hsl(${Math.round(hue)}, 55%, 46%)`);
  }
}
function colour(replica) {
  if (!replica) return "var(--unowned)";
  if (!colours.has(replica)) assignColours([replica]);
  return colours.get(replica);
}

function ms(n) {
  if (n === null || n === undefined) return "–";
  if (n < 1000) return `${Math.max(0, Math.round(n))}ms`;
  if (n < 60000) return `${(n / 1000).toFixed(1)}s`;
  const s = Math.round(n / 1000);
  return s < 3600 ? `${Math.floor(s / 60)}m ${s % 60}s` : `${Math.floor(s / 3600)}h ${Math.floor(s / 60) % 60}m`;
}

// A time left at read time, counted down since the event came.
function left(value, at) {
  if (value === null || value === undefined) return null;
  return Math.max(0, value - (Date.now() - at));
}

// ---- connection -------------------------------------------------------------------

function connect() {
  if (state.source) state.source.close();
  const url = state.group ? `/events?group=${encodeURIComponent(state.group)}` : "/events";
  const source = new EventSource(url);
  state.source = source;
  $("conn").dataset.state = "connecting";
  $("conn").textContent = "connecting";
  source.onopen = () => {
    $("conn").dataset.state = "live";
    $("conn").textContent = "live";
  };
  source.onerror = () => {
    $("conn").dataset.state = "reconnecting";
    $("conn").textContent = "reconnecting";
  };
  source.addEventListener("overview", (e) => {
    state.overview = JSON.parse(e.data);
    state.overviewAt = Date.now();
    renderOverview();
  });
  source.addEventListener("group", (e) => {
    const data = JSON.parse(e.data);
    if (data.group !== state.group) return;
    const changed = !!data.partitions;
    if (changed) state.partitions = data.partitions;
    assignColours([...(data.replicas || []).map((r) => r.replica),
      ...state.partitions.map((p) => p.owner)]);
    if (data.moves && data.moves.length) {
      state.moves = state.moves.concat(data.moves).slice(-MOVES_SHOWN);
      renderMoves();
    }
    delete data.partitions;
    delete data.moves;
    state.head = data;
    state.headAt = Date.now();
    renderGroup(changed);
  });
}

function route() {
  const m = location.hash.match(/^#\/group\/(.+)$/);
  const group = m ? decodeURIComponent(m[1]) : null;
  if (group === state.group && state.source) return;
  state.group = group;
  state.head = null;
  state.partitions = [];
  state.moves = [];
  state.mapPage = 0;
  $("pick").hidden = !!group;
  $("group").hidden = !group;
  replace($("moves"));
  connect();
  renderOverview();
}

// ---- overview ---------------------------------------------------------------------

function renderOverview() {
  const o = state.overview;
  if (!o) return;
  $("prefix").textContent = o.prefix || "…";
  $("read-at").textContent = o.read_at ? o.read_at.slice(11, 23) : "–";
  document.body.classList.toggle("admin", !!o.admin);
  $("mode").textContent = o.admin ? "admin" : "read-only";
  if (o.error) $("read-at").textContent += ` (error: ${o.error})`;
  renderAlerts();
  replace($("groups"), ...(o.groups || []).map((g) =>
    el("li", { "data-group": g.group },
      el("a", { href: `#/group/${encodeURIComponent(g.group)}`, "aria-current": g.group === state.group ? "page" : null },
        el("span", {}, el("span", { class: "dot", "data-health": g.health, title: g.health }), g.group),
        el("span", { class: "counts" },
          `${g.owned}/${g.partitions} owned · ${g.live_replicas} ${g.live_replicas === 1 ? "replica" : "replicas"}`)))));
  if (!(o.groups || []).length) replace($("groups"), el("li", { class: "muted" }, "no groups"));
  renderDuties();
}

function renderDuties() {
  const o = state.overview;
  if (!o) return;
  const rows = (o.duties || []).map((d) =>
    el("tr", { "data-duty": d.duty, "data-state": d.state },
      el("td", {}, el("span", { class: "dot", "data-health": d.state === "led" ? "ok" : "page" }), d.duty),
      el("td", { title: d.fence ? `fence ${d.fence}` : null }, d.leader || (d.state === "nobody" ? "nobody" : d.state)),
      el("td", { class: "num", "data-countdown": "" }, ms(left(d.lease_left_ms, state.overviewAt)))));
  replace($("duties").tBodies[0], ...(rows.length ? rows : [el("tr", {}, el("td", { colspan: 3, class: "muted" }, "no duties"))]));
}

function renderAlerts() {
  const alerts = [...((state.overview && state.overview.alerts) || [])];
  replace($("alerts"), ...alerts.map((a) =>
    el("div", { class: "alert", "data-severity": a.severity, "data-firing": String(a.firing), "data-alert": a.alert },
      el("b", {}, a.firing ? a.severity.toUpperCase() : "pending"),
      el("span", {}, a.summary), " ",
      el("span", { class: "muted" }, `${a.alert} · since ${a.since.slice(11, 19)}`))));
}

// ---- group ------------------------------------------------------------------------

// `changed`: the partitions came (the map, weights and preferences are drawn again only
// then: a large group's map is not rebuilt every second).
function renderGroup(changed) {
  const h = state.head;
  if (!h) return;
  $("group-name").textContent = h.group;
  const err = $("group-error");
  err.hidden = !h.error;
  err.textContent = h.error || "";
  if (h.partition_count === undefined) return; // an error before any read
  const health = (h.alerts || []).some((a) => a.severity === "page") ? "page" : (h.alerts || []).length ? "warn" : "ok";
  replace($("group-health"), el("span", { class: "dot", "data-health": health }), health);
  $("group-summary").textContent =
    `${h.partition_count} partitions, ${h.owned} owned, ${h.unowned} unowned · ` +
    `${h.live_replicas} live replicas · spread ${h.spread}` +
    (h.weighted ? ` · weighted, total weight ${h.total_weight}` : "") +
    (h.drained.length ? ` · drained: ${h.drained.join(", ")}` : "") +
    ` · read ${h.read_at.slice(11, 23)}`;
  renderReplicas();
  if (changed) {
    renderMap();
    renderWeights();
  }
  renderPreferences();
}

function renderReplicas() {
  const h = state.head;
  const scale = Math.max(1, ...h.replicas.map((r) => Math.max(r.load, r.share)));
  const admin = document.body.classList.contains("admin");
  replace($("replicas").tBodies[0], ...h.replicas.map((r) => {
    const share = r.share || 0;
    const title = `load ${r.load}, share ${share.toFixed(1)}`;
    return el("tr", { "data-replica": r.replica, "data-state": r.state, "data-drained": String(r.drained) },
      el("td", {}, el("span", { class: "swatch", style: `background:${colour(r.replica)}` }), r.replica,
        r.instance ? el("div", { class: "muted mono" }, r.instance) : null,
        r.address ? el("div", { class: "muted mono address", title: "advertised address" }, r.address) : null),
      el("td", {}, r.state + (r.drained ? " (drained)" : "")),
      el("td", { class: "num" }, r.owned),
      el("td", { title },
        el("div", { class: "bar" },
          el("div", { class: "fill", style: `width:${(100 * r.load) / scale}%;background:${colour(r.replica)}` }),
          share > 0 ? el("div", { class: "share", style: `left:${(100 * share) / scale}%` }) : null),
        el("span", { class: "muted mono" }, `${r.load} / ${share.toFixed(1)}`)),
      el("td", { class: "num" }, r.capacity),
      el("td", { class: "num" }, ms(left(r.session_left_ms, state.headAt))),
      admin ? el("td", {}, r.drained
        ? el("button", { type: "button", onclick: () => act("undrain", { replica: r.replica }) }, "undrain")
        : el("button", { type: "button", onclick: () => {
            if (confirm(`Drain ${r.replica}? It hands all its partitions over.`)) act("drain", { replica: r.replica });
          } }, "drain")) : null);
  }));
}

function filteredPartitions() {
  const q = $("map-filter").value.trim();
  if (!q) return state.partitions;
  return state.partitions.filter((p) => p.partition.includes(q) || (p.owner || "").includes(q));
}

function renderMap() {
  const all = state.partitions;
  // The ownership bar: one segment per owner, sized by count (any group size).
  const counts = new Map();
  for (const p of all) counts.set(p.owner || "", (counts.get(p.owner || "") || 0) + 1);
  const owners = [...counts.entries()].sort((a, b) => (a[0] === "") - (b[0] === "") || a[0].localeCompare(b[0]));
  replace($("ownership"), ...owners.map(([owner, n]) =>
    el("div", { "data-replica": owner, "data-count": n, title: `${owner || "unowned"}: ${n}`,
      style: `flex:${n};background:${owner ? colour(owner) : "var(--unowned)"}` })));
  const shown = filteredPartitions();
  const pages = Math.max(1, Math.ceil(shown.length / PAGE));
  state.mapPage = Math.min(state.mapPage, pages - 1);
  const from = state.mapPage * PAGE;
  const slice = shown.slice(from, from + PAGE);
  const labelled = all.length <= LABELLED;
  $("map").classList.toggle("labelled", labelled);
  $("map-count").textContent = `${all.length}`;
  $("map-page").textContent = shown.length
    ? `${from + 1}–${from + slice.length} of ${shown.length}` : "none";
  $("map-prev").disabled = state.mapPage === 0;
  $("map-next").disabled = state.mapPage >= pages - 1;
  replace($("map"), ...slice.map((p) => el("div", {
    class: "cell",
    "data-partition": p.partition,
    "data-owner": p.owner || "",
    "data-weight": p.weight,
    title: `${p.partition} → ${p.owner || "no owner"} · weight ${p.weight} · fence ${p.fence}` +
      (p.preferred ? ` · preferred on ${p.preferred}` : ""),
    style: p.owner ? `background:${colour(p.owner)}` : null,
  }, labelled ? p.partition : null)));
  // For tests and the curious: when each map was drawn, since the page opened.
  const detail = { partitions: all.length, cells: slice.length };
  performance.mark("leasehold-map", { detail });
  requestAnimationFrame(() => setTimeout(() => performance.mark("leasehold-map-painted", { detail })));
}

function renderWeights() {
  const h = state.head;
  $("weights-box").hidden = !h.weighted;
  if (!h.weighted) return;
  // The heaviest 20; of a group with a few weights set, only those (not a list of 1s).
  const all = [...state.partitions].sort((a, b) => b.weight - a.weight);
  const above = all.filter((p) => p.weight > all[all.length - 1].weight);
  const heavy = (above.length ? above : all).slice(0, 20);
  replace($("weights").tBodies[0], ...heavy.map((p) =>
    el("tr", { "data-partition": p.partition },
      el("td", {}, p.partition), el("td", { class: "num" }, p.weight), el("td", {}, p.owner || "–"))));
}

function renderPreferences() {
  const prefs = state.head.preferences || [];
  $("preferences-box").hidden = !prefs.length;
  const owner = new Map(state.partitions.map((p) => [p.partition, p.owner]));
  const admin = document.body.classList.contains("admin");
  replace($("preferences").tBodies[0], ...prefs.map((p) =>
    el("tr", { "data-partition": p.partition },
      el("td", {}, p.partition), el("td", {}, p.replica), el("td", {}, owner.get(p.partition) || "–"),
      admin ? el("td", {}, el("button", { type: "button", class: "unprefer",
        onclick: () => act("prefer", { partition: p.partition, replica: null }) }, "unprefer")) : null)));
}

function renderMoves() {
  const part = $("moves-partition").value.trim();
  const rep = $("moves-replica").value.trim();
  const shown = state.moves.filter((m) =>
    (!part || m.partition.includes(part)) &&
    (!rep || m.to.includes(rep) || (m.from || "").includes(rep)));
  $("moves-count").textContent = `${shown.length} of the last ${state.moves.length}`;
  replace($("moves"), ...shown.slice().reverse().map((m) =>
    el("li", { "data-partition": m.partition, "data-from": m.from || "", "data-to": m.to, "data-cause": m.cause },
      el("time", { datetime: m.started, title: m.started }, m.started.slice(11, 23)),
      el("span", { class: "mono" }, m.partition),
      el("span", {},
        el("span", { class: "swatch", style: `background:${colour(m.from)}` }), m.from || "–", " → ",
        el("span", { class: "swatch", style: `background:${colour(m.to)}` }), m.to),
      el("span", { class: "cause", "data-cause": m.cause }, m.cause),
      el("span", { class: "muted mono", title: "how long it had no owner" },
        m.unowned_ms === null ? "" : `unowned ${ms(m.unowned_ms)}`))));
}

// ---- admin ------------------------------------------------------------------------

async function act(action, body) {
  const token = $("token").value || sessionStorage.getItem("leasehold-token") || "";
  if ($("token").value) sessionStorage.setItem("leasehold-token", $("token").value);
  const out = $("admin-result");
  try {
    const r = await fetch(`/api/groups/${encodeURIComponent(state.group)}/${action}`, {
      method: "POST",
      headers: { "Content-Type": "application/json", "X-Leasehold-Token": token },
      body: JSON.stringify(body),
    });
    const json = await r.json();
    out.className = r.ok ? "" : "error";
    out.textContent = r.ok ? json.message : `${r.status}: ${json.error}`;
  } catch (e) {
    out.className = "error";
    out.textContent = String(e);
  }
}

function words(s) {
  return s.split(/[\s,]+/).filter(Boolean);
}

$("weight-form").addEventListener("submit", (e) => {
  e.preventDefault();
  const f = e.target;
  act("weight", { partition: f.partition.value.trim(), weight: Number(f.weight.value) });
});
$("prefer-form").addEventListener("submit", (e) => {
  e.preventDefault();
  const f = e.target;
  act("prefer", { partition: f.partition.value.trim(), replica: f.replica.value.trim() || null });
});
$("add-form").addEventListener("submit", (e) => {
  e.preventDefault();
  act("partitions/add", { partitions: words(e.target.partitions.value) });
});
$("remove-form").addEventListener("submit", (e) => {
  e.preventDefault();
  const names = words(e.target.partitions.value);
  if (confirm(`Remove ${names.length} partitions from ${state.group}?`)) act("partitions/remove", { partitions: names });
});

// ---- wiring -----------------------------------------------------------------------

$("map-filter").addEventListener("input", () => { state.mapPage = 0; renderMap(); });
$("map-prev").addEventListener("click", () => { state.mapPage--; renderMap(); });
$("map-next").addEventListener("click", () => { state.mapPage++; renderMap(); });
$("moves-partition").addEventListener("input", renderMoves);
$("moves-replica").addEventListener("input", renderMoves);
$("token").value = sessionStorage.getItem("leasehold-token") || "";
window.addEventListener("hashchange", route);
// Count leases and sessions down between events.
setInterval(() => {
  renderDuties();
  if (state.head && state.head.replicas) renderReplicas();
}, 1000);
route();
