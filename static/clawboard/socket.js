// The tab's one websocket: what changed on the lists this page shows, and the nav's
// "Approvals N" badge. Other pages open /ws/live/; the run page's live.js opens its tree
// socket with notices=1 and hands the notices here (window.clawboardSocket.handle), so a tab
// never holds two sockets. While no socket is up, the lists are fetched every 3 s instead,
// and the top bar says so.
(function () {
  const POLL_MS = 3000;
  const MIN_GAP_MS = 1000; // a fragment is fetched at most once a second, however busy the runs
  const lastFetch = new Map();
  // topic -> the fragments that show it (fetched again from their hx-get, else from this
  // page's own URL, selecting the same element).
  const TARGETS = { approvals: ["#approvals"], tasks: ["#tasks"], home: ["#home-panels"], runs: ["#run-table"] };
  const S = {
    up: false,
    everUp: false,
    closedFor: null,
    socket: null,
    retry: 0,
    pending: new Set(),
    timer: null,
    poller: null,
    received: [],
  };
  window.clawboardSocket = S;
  // A fragment the operator is working in (typing in it, or boxes ticked that the server did
  // not tick) is not replaced by a background refresh: it is fetched again once they are done
  // (focus leaves it, or a box changes). This holds for a refresh asked now and for one whose
  // answer comes back after they started.
  function holdFor(el) {
    if (el.contains(document.activeElement) && document.activeElement !== document.body) return "focusout";
    const ticked = Array.from(el.querySelectorAll("input[type=checkbox]")).some((box) => box.checked !== box.defaultChecked);
    return ticked ? "change" : null;
  }
  function topicsOf(el) {
    return Object.keys(TARGETS).filter((t) => TARGETS[t].some((sel) => el.matches(sel)));
  }
  function held(el) {
    const event = holdFor(el);
    if (event) el.addEventListener(event, () => refresh(topicsOf(el)), { once: true });
    return !!event;
  }
  document.addEventListener("htmx:beforeSwap", (evt) => {
    const el = evt.detail.target;
    const config = evt.detail.requestConfig || {};
    const ours = config.headers && config.headers["X-Clawboard-Refresh"];
    if (el && ours && held(el)) evt.detail.shouldSwap = false; // only a background refresh is held back
  });
  window.clawboardPolling = () => !S.up;

  function stateEl() { return document.getElementById("socket-state"); }

  S.show = function (state, text) {
    const el = stateEl();
    if (!el) return;
    el.dataset.state = state;
    el.textContent = text;
  };

  S.setUp = function (up, code) {
    const wasDown = !S.up;
    S.up = up;
    if (up) {
      S.closedFor = null;
      S.show("live", "live");
      if (S.everUp && wasDown) refresh(Object.keys(TARGETS)); // missed notices while down
      S.everUp = true;
      stopPolling();
    } else if (code >= 4400 && code < 4500) {
      S.closedFor = code;
      S.show("refused", "disconnected (" + code + "): reload the page");
      startPolling();
    } else {
      S.show("polling", "live updates down: polling every 3 s");
      startPolling();
    }
  };

  S.badge = function (count) {
    const link = document.querySelector('nav a[href="/approvals/"]');
    if (!link || typeof count !== "number") return;
    let badge = document.getElementById("nav-approvals-count");
    if (count > 0) {
      if (!badge) {
        badge = document.createElement("span");
        badge.id = "nav-approvals-count";
        badge.className = "badge badge-warn";
        link.append(" ", badge);
      }
      badge.textContent = String(count);
    } else if (badge) {
      badge.remove();
    }
  };

  S.handle = function (msg) {
    S.received.push(msg.type);
    if (msg.type === "hello" || msg.type === "changed") S.badge(msg.approvals);
    if (msg.type === "changed") refresh(msg.topics || []);
    document.dispatchEvent(new CustomEvent("clawboard:notice", { detail: msg }));
  };

  function refresh(topics) {
    topics.forEach((t) => S.pending.add(t));
    if (!S.timer) S.timer = setTimeout(flush, 150);
  }

  function flush() {
    S.timer = null;
    const topics = Array.from(S.pending);
    S.pending.clear();
    topics.forEach((topic) => (TARGETS[topic] || []).forEach((sel) => {
      const el = document.querySelector(sel);
      if (!el || !window.htmx) return;
      if (held(el)) return; // a deny reason being typed, approvals ticked for a bulk decision
      const wait = (lastFetch.get(sel) || 0) + MIN_GAP_MS - Date.now();
      if (wait > 0) { setTimeout(() => refresh([topic]), wait); return; }
      lastFetch.set(sel, Date.now());
      const url = el.getAttribute("hx-get");
      const headers = { "X-Clawboard-Refresh": "1" };
      if (url) htmx.ajax("GET", url, { target: el, swap: el.getAttribute("hx-swap") || "innerHTML", headers });
      else htmx.ajax("GET", location.pathname + location.search, { target: sel, select: sel, swap: "outerHTML", headers });
    }));
    if (topics.includes("approvals") && !S.up) countApprovals();
  }

  async function countApprovals() {
    try {
      const resp = await fetch("/api/v1/approvals/?status=pending", { credentials: "same-origin" });
      if (!resp.ok) return;
      const data = await resp.json();
      const list = Array.isArray(data) ? data : data.results;
      if (Array.isArray(list)) S.badge(typeof data.count === "number" ? data.count : list.length);
    } catch (e) { /* the next round tries again */ }
  }

  function startPolling() {
    if (S.poller) return;
    S.poller = setInterval(() => {
      refresh(Object.keys(TARGETS));
      document.dispatchEvent(new CustomEvent("clawboard:poll"));
    }, POLL_MS);
  }

  function stopPolling() {
    if (S.poller) clearInterval(S.poller);
    S.poller = null;
  }

  function connect() {
    const proto = location.protocol === "https:" ? "wss" : "ws";
    const ws = new WebSocket(`${proto}://${location.host}/ws/live/`);
    S.socket = ws;
    ws.onopen = () => { S.retry = 0; S.setUp(true); };
    ws.onmessage = (msg) => {
      let data;
      try { data = JSON.parse(msg.data); } catch (e) { return; }
      if (data && data.type) S.handle(data);
    };
    ws.onclose = (event) => {
      S.socket = null;
      S.setUp(false, event.code);
      if (event.code >= 4400 && event.code < 4500) return; // signed out / no role: reload
      S.retry = Math.min(S.retry + 1, 6);
      setTimeout(connect, 250 * 2 ** (S.retry - 1));
    };
  }

  // Open /ws/live/ unless the page brought its own socket (the run page's tree socket).
  document.addEventListener("DOMContentLoaded", () => {
    if (!stateEl()) return; // signed out: no socket
    if (!document.getElementById("run-tree")) connect();
  });
})();
