// Live run tree: a websocket on the root's event log. Every event marks its run (and, for
// usage or status changes, its ancestors) dirty; dirty headers and new nodes are fetched as
// server-rendered HTML in one request per burst. A dropped socket reconnects with the last
// event id seen, so the page catches up with exactly the events it missed. The same socket
// carries the tab's notices (notices=1), handed to socket.js. While it is down, the events are
// read from the REST event log every 3 s instead (socket.js's "clawboard:poll").
(function () {
  const tree = document.getElementById("run-tree");
  if (!tree) return;
  const root = tree.dataset.root;
  const state = {
    lastId: parseInt(tree.dataset.lastEvent || "0", 10),
    socket: null,
    dirty: new Set(),
    fresh: new Set(),
    timer: null,
    retry: 0,
    received: 0,
    orphans: new Map(), // new node id -> placement attempts while its parent is not on the page
  };
  // A new node whose parent is not drawn (it sits beyond a "Show more children" button) is
  // tried this many times, then left to the parent's own "show more" batch.
  const MAX_ORPHAN_TRIES = 20;
  const dot = document.getElementById("live-dot");
  const label = document.getElementById("live-text");

  function setLive(on, text, code) {
    if (dot) dot.classList.toggle("on", on);
    if (label) label.textContent = text;
    if (window.clawboardSocket) window.clawboardSocket.setUp(on, code);
  }

  // The Controls panel follows the status of the page's run (Cancel/Steer while it runs,
  // Continue/Resume once it ended); what is typed in the steer box survives the refresh.
  const controlsRun = () => (document.getElementById("run-controls") || {}).dataset?.run;
  let controlsTimer = null;
  function refreshControls() {
    if (controlsTimer) return;
    controlsTimer = setTimeout(async () => {
      controlsTimer = null;
      const run = (document.getElementById("run-controls") || {}).dataset?.run;
      if (!run) return;
      try {
        const resp = await fetch(`/runs/${run}/controls/`, { credentials: "same-origin", headers: { "HX-Request": "true" } });
        if (!resp.ok) return;
        const holder = document.createElement("div");
        holder.innerHTML = await resp.text();
        const fresh = holder.firstElementChild;
        const box = document.getElementById("run-controls"); // read now: a steer may have answered meanwhile
        if (!fresh || !box) return;
        const typed = (document.getElementById("steer-message") || {}).value || "";
        const hadFocus = document.activeElement && document.activeElement.id === "steer-message";
        // what the last steer answered stays in view: an error until the next try, the
        // "queued" notice only while the message still waits for its model turn
        ["steer-notice", "steer-error"].forEach((id) => {
          const said = box.querySelector("#" + id);
          if (id === "steer-notice" && !fresh.dataset.steerPending) return;
          if (said && !fresh.querySelector("#" + id)) fresh.append(said.cloneNode(true));
        });
        box.replaceWith(fresh);
        if (window.htmx) htmx.process(fresh);
        const area = document.getElementById("steer-message");
        if (area && typed) area.value = typed;
        // the run ended before the steer was sent: the text becomes the Continue prompt
        const follow = document.getElementById("continue-prompt");
        if (!area && typed && follow && !follow.value) follow.value = typed;
        if (area && hadFocus) area.focus();
      } catch (e) { setTimeout(refreshControls, 1000); }
    }, 100);
  }
  // The detail panel of a node whose status changed is fetched again.
  function refreshDetail(id) {
    const open = document.querySelector("#trace-detail .node-detail");
    if (open && open.dataset.run === id && window.htmx) {
      htmx.ajax("GET", `/runs/${id}/detail/`, { target: "#trace-detail", swap: "innerHTML" });
    }
  }

  function ancestors(id) {
    const out = [];
    let el = document.getElementById("run-" + id);
    while (el && el.dataset.parent) {
      out.push(el.dataset.parent);
      el = document.getElementById("run-" + el.dataset.parent);
    }
    return out;
  }

  const STATUS_OF = {
    "run.queued": "queued", "run.started": "running", "run.completed": "completed", "run.failed": "failed",
    "run.cancelled": "cancelled", "run.timed_out": "timed_out", "run.lost": "lost",
  };

  function apply(event) {
    if (event.id <= state.lastId) return; // already seen: never doubled
    state.lastId = event.id;
    state.received += 1;
    const id = event.run_id;
    const node = document.getElementById("run-" + id);
    if (!node) {
      state.fresh.add(id);
    } else {
      let status = STATUS_OF[event.type];
      if (event.type === "run.waiting" && event.data) status = event.data.status;
      const badge = document.getElementById("run-" + id + "-status");
      if (status && badge) {
        badge.textContent = status;
        badge.className = "badge status-" + status;
      }
      state.dirty.add(id);
    }
    if (event.type === "model.response" || STATUS_OF[event.type]) ancestors(id).forEach((a) => state.dirty.add(a));
    // the Controls panel lists the approvals pending anywhere in the tree, and a steer's
    // notice until it is delivered
    const steerShown = document.getElementById("steer-notice");
    if (event.type.startsWith("approval.") || (steerShown && event.type === "model.request" && id === controlsRun())) refreshControls();
    if ((STATUS_OF[event.type] || event.type === "run.waiting") && node) {
      if (id === controlsRun()) refreshControls();
      refreshDetail(id);
    }
    schedule();
  }

  function schedule() {
    if (state.timer) return;
    state.timer = setTimeout(flush, 150);
  }

  async function flush() {
    state.timer = null;
    const ids = Array.from(state.dirty).filter((i) => document.getElementById("run-" + i)).slice(0, 200);
    const fresh = Array.from(state.fresh).slice(0, 200);
    ids.forEach((i) => state.dirty.delete(i));
    fresh.forEach((i) => state.fresh.delete(i));
    if (!ids.length && !fresh.length) return;
    const url = `/runs/${root}/nodes/?ids=${ids.join(",")}&new=${fresh.join(",")}`;
    try {
      const resp = await fetch(url, { credentials: "same-origin", headers: { "HX-Request": "true" } });
      if (!resp.ok) throw new Error("HTTP " + resp.status);
      place(await resp.text());
    } catch (err) {
      ids.forEach((i) => state.dirty.add(i));
      fresh.forEach((i) => state.fresh.add(i));
      setTimeout(schedule, 1000);
    }
    if (state.dirty.size || state.fresh.size) schedule();
  }

  function place(html) {
    const box = document.createElement("div");
    box.innerHTML = html;
    const scale = box.querySelector("template[data-trace-end]");
    if (scale && window.clawboardTrace) clawboardTrace.rescale(+scale.dataset.traceEnd, +scale.dataset.traceNow);
    box.querySelectorAll("[hx-swap-oob]").forEach((head) => {
      const old = document.getElementById(head.id);
      head.removeAttribute("hx-swap-oob");
      if (old) {
        old.replaceWith(head);
        if (window.htmx) htmx.process(head);
      }
    });
    box.querySelectorAll("template[data-new-node]").forEach((tpl) => {
      const id = tpl.dataset.newNode;
      if (document.getElementById("run-" + id)) return;
      const parent = document.getElementById("run-" + tpl.dataset.parent + "-children");
      if (!parent) { // its parent is on its way (retry), or not drawn at all (give up)
        const tries = (state.orphans.get(id) || 0) + 1;
        state.orphans.set(id, tries);
        if (tries < MAX_ORPHAN_TRIES) state.fresh.add(id);
        return;
      }
      state.orphans.delete(id);
      const frag = tpl.content.cloneNode(true);
      const more = parent.querySelector(":scope > li.more");
      parent.insertBefore(frag, more);
      const added = document.getElementById("run-" + id);
      if (added && window.htmx) htmx.process(added);
      const parentNode = document.getElementById("run-" + tpl.dataset.parent);
      if (parentNode) delete parentNode.dataset.leaf;
    });
    if (window.clawboardTrace) clawboardTrace.refreshed();
  }

  function connect() {
    const proto = location.protocol === "https:" ? "wss" : "ws";
    const ws = new WebSocket(`${proto}://${location.host}/ws/runs/${root}/?after=${state.lastId}&notices=1`);
    state.socket = ws;
    ws.onopen = () => { state.retry = 0; setLive(true, "live"); };
    ws.onmessage = (msg) => {
      let data;
      try { data = JSON.parse(msg.data); } catch (e) { return; }
      if (Array.isArray(data.events)) data.events.forEach(apply);
      else if (data.event) apply(data.event);
      else if (data.id && data.type) apply(data);
      else if (data.type && window.clawboardSocket) clawboardSocket.handle(data); // notices
    };
    ws.onclose = (event) => {
      if (event.code >= 4400 && event.code < 4500) { // 4401 logged out, 4403 no role, 4404 no run
        setLive(false, "disconnected (" + event.code + "): reload the page", event.code);
        return;
      }
      setLive(false, "reconnecting…", event.code);
      state.retry = Math.min(state.retry + 1, 6);
      setTimeout(connect, 250 * 2 ** (state.retry - 1));
    };
  }

  // Fallback while the socket is down: the same events, from the REST event log.
  let polling = false;
  document.addEventListener("clawboard:poll", async () => {
    if (polling || (state.socket && state.socket.readyState === WebSocket.OPEN)) return;
    polling = true;
    try {
      const resp = await fetch(`/api/v1/runs/${root}/events/?after=${state.lastId}&limit=1000`, { credentials: "same-origin" });
      if (resp.ok) (await resp.json()).forEach(apply);
    } catch (e) { /* next round */ }
    polling = false;
  });

  window.clawboardLive = state;
  connect();
})();
