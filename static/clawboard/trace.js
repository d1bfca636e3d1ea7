// The run page's trace view: the waterfall's scale, running bars and "now" line; folding,
// keyboard moves and `/` search in the tree; the detail panel's links and copy buttons.
// Bars are placed by CSS from --s/--e (ms from the root's start) over --total on #run-tree,
// so a rescale is one style change, whatever the size of the tree.
(function () {
  const tree = document.getElementById("run-tree");
  if (!tree) return;
  const body = document.getElementById("trace-body");
  const nowLine = document.getElementById("now-line");
  const axis = document.getElementById("trace-axis-lane");
  const search = document.getElementById("tree-search");
  const searchCount = document.getElementById("tree-search-count");
  const detail = document.getElementById("trace-detail");
  const loadedAt = Date.now();
  let serverNow = parseInt(tree.dataset.now || "0", 10); // ms from the root's start, at load
  let serverAt = loadedAt;
  let serverEnd = Math.max(1, parseInt(tree.dataset.end || "1", 10)); // the tree's end, or now
  let total = serverEnd;

  const fmt = (ms) => window.formatDuration(ms / 1000); // app.js: the dashboard's one format

  const nowMs = () => serverNow + (Date.now() - serverAt);

  let drawnTotal = -1;
  function drawAxis() {
    if (!axis || Math.floor(total) === drawnTotal) return;
    drawnTotal = Math.floor(total);
    const parts = [];
    for (let i = 0; i <= 4; i++) parts.push(`<span style="left:${i * 25}%">${fmt((total * i) / 4)}</span>`);
    axis.innerHTML = parts.join("");
  }

  function tick() {
    const running = tree.querySelectorAll(".lane .running");
    const now = nowMs();
    if (!running.length) total = serverEnd; // finished: the axis ends where the tree did
    if (running.length) {
      total = Math.max(total, now);
      running.forEach((bar) => bar.style.setProperty("--e", String(Math.floor(now))));
      tree.querySelectorAll(".duration.live").forEach((el) => {
        const head = el.closest(".node-head");
        const s = head ? parseInt(head.dataset.s || "0", 10) : 0;
        el.textContent = fmt(now - s);
      });
    }
    tree.style.setProperty("--total", String(Math.floor(total)));
    if (nowLine) {
      nowLine.hidden = running.length === 0;
      nowLine.style.setProperty("--now", String(Math.floor(Math.min(now, total))));
      nowLine.style.setProperty("--total", String(Math.floor(total)));
    }
    drawAxis();
  }

  // -- folding and moving -----------------------------------------------------------------
  const heads = () => Array.from(tree.querySelectorAll(".node-head")).filter((h) => h.offsetParent !== null);
  const nodeOf = (head) => head.closest("li.node");
  const headOf = (li) => li && li.querySelector(":scope > .node-head");
  let selected = null;
  let openTimer = null;

  function fold(li, collapse) {
    if (!li || li.dataset.leaf) return;
    const next = collapse === undefined ? !li.classList.contains("collapsed") : collapse;
    li.classList.toggle("collapsed", next);
    const head = headOf(li);
    if (head) head.setAttribute("aria-expanded", next ? "false" : "true");
  }

  function select(head, { open = true, focus = true } = {}) {
    if (!head) return;
    if (selected && selected !== head) { selected.classList.remove("selected"); selected.setAttribute("aria-selected", "false"); selected.tabIndex = -1; }
    selected = head;
    head.classList.add("selected");
    head.setAttribute("aria-selected", "true");
    head.tabIndex = 0;
    if (focus) head.focus({ preventScroll: true });
    head.scrollIntoView({ block: "nearest" });
    if (open && window.htmx) {
      clearTimeout(openTimer);
      openTimer = setTimeout(() => htmx.ajax("GET", head.getAttribute("hx-get"), { target: "#trace-detail", swap: "innerHTML" }), 120);
    }
  }

  tree.addEventListener("click", (event) => {
    const twisty = event.target.closest(".twisty");
    if (twisty) { // fold without opening the detail
      event.preventDefault();
      event.stopPropagation();
      fold(nodeOf(twisty));
      return;
    }
    const head = event.target.closest(".node-head");
    if (head) select(head, { open: false }); // htmx opens the detail itself on click
  }, true);

  tree.addEventListener("keydown", (event) => {
    if (event.target.closest("button, a, input") && !event.target.classList.contains("node-head")) return;
    const list = heads();
    const current = selected && list.includes(selected) ? selected : list[0];
    const at = list.indexOf(current);
    const li = current ? nodeOf(current) : null;
    let handled = true;
    switch (event.key) {
      case "ArrowDown": case "j": select(list[Math.min(list.length - 1, at + 1)]); break;
      case "ArrowUp": case "k": select(list[Math.max(0, at - 1)]); break;
      case "Home": select(list[0]); break;
      case "End": select(list[list.length - 1]); break;
      case "ArrowRight": case "l":
        if (li && li.classList.contains("collapsed")) fold(li, false);
        else if (li && !li.dataset.leaf) select(headOf(li.querySelector(":scope > ul > li.node")));
        break;
      case "ArrowLeft": case "h":
        if (li && !li.dataset.leaf && !li.classList.contains("collapsed")) fold(li, true);
        else if (li && li.dataset.parent) select(headOf(document.getElementById("run-" + li.dataset.parent)));
        break;
      case "Enter": case " ": fold(li); break;
      default: handled = false;
    }
    if (handled) event.preventDefault();
  });

  // -- `/` search -------------------------------------------------------------------------
  document.addEventListener("keydown", (event) => {
    if (event.key !== "/" || event.ctrlKey || event.metaKey || event.altKey) return;
    const t = event.target;
    if (t && (t.closest("input, textarea, select") || t.isContentEditable)) return;
    event.preventDefault();
    if (search) { search.focus(); search.select(); }
  });

  let searchTimer = null;
  function runSearch() {
    const q = (search.value || "").trim().toLowerCase();
    const nodes = tree.querySelectorAll("li.node");
    nodes.forEach((li) => li.classList.remove("search-match", "search-hidden"));
    if (!q) {
      tree.classList.remove("searching");
      if (searchCount) searchCount.textContent = "";
      return [];
    }
    const matches = [];
    const keep = new Set();
    nodes.forEach((li) => {
      const head = headOf(li);
      const text = (li.id + " " + (head ? head.textContent : "")).toLowerCase();
      if (text.includes(q)) {
        matches.push(li);
        li.classList.add("search-match");
        for (let up = li; up && up.classList && up.classList.contains("node"); up = up.parentElement.closest("li.node")) {
          if (keep.has(up)) break;
          keep.add(up);
        }
      }
    });
    nodes.forEach((li) => { if (!keep.has(li)) li.classList.add("search-hidden"); });
    tree.classList.add("searching");
    if (searchCount) searchCount.textContent = matches.length === 1 ? "1 match" : matches.length + " matches";
    return matches;
  }
  if (search) {
    search.addEventListener("input", () => { clearTimeout(searchTimer); searchTimer = setTimeout(runSearch, 120); });
    search.addEventListener("keydown", (event) => {
      if (event.key === "Enter") {
        event.preventDefault();
        const first = runSearch()[0];
        if (first) select(headOf(first));
      } else if (event.key === "Escape") {
        search.value = "";
        runSearch();
        if (selected) selected.focus();
      } else if (event.key === "ArrowDown") {
        event.preventDefault();
        const first = tree.querySelector("li.search-match") || tree.querySelector("li.node");
        if (first) select(headOf(first));
      }
    });
  }

  // -- the detail panel -------------------------------------------------------------------
  if (detail) {
    detail.addEventListener("click", async (event) => {
      const copy = event.target.closest("[data-copy]");
      if (copy) {
        event.preventDefault(); // a button inside <summary> must not fold it
        const pre = copy.closest("details")?.querySelector("pre");
        const text = pre ? pre.textContent : "";
        try {
          await navigator.clipboard.writeText(text);
        } catch (e) {
          const area = document.createElement("textarea");
          area.value = text;
          document.body.append(area);
          area.select();
          document.execCommand("copy");
          area.remove();
        }
        copy.textContent = "copied";
        setTimeout(() => (copy.textContent = "copy"), 1500);
        return;
      }
      const link = event.target.closest("[data-run-link]");
      if (link) {
        const head = document.getElementById("run-" + link.dataset.runLink + "-head");
        if (head) { // on this page: select its node instead of leaving the page
          event.preventDefault();
          for (let li = nodeOf(head).parentElement.closest("li.node"); li; li = li.parentElement.closest("li.node")) fold(li, false);
          select(head);
        }
        return;
      }
      if (event.target.closest("[data-detail-close]")) {
        detail.innerHTML = '<p class="muted">Select a node to see its details.</p>';
        if (selected) selected.focus();
      }
    });
  }

  window.clawboardTrace = {
    rescale(end, now) {
      if (!isNaN(now)) { serverNow = now; serverAt = Date.now(); }
      if (!isNaN(end)) serverEnd = Math.max(1, end);
      tick();
    },
    refreshed() {
      if (selected && !document.body.contains(selected)) {
        const again = document.getElementById(selected.id);
        if (again) { selected = null; select(again, { open: false, focus: false }); }
      }
      if (search && search.value) runSearch();
      tick();
    },
    select,
    fold,
  };

  // -- the split between the tree and the waterfall ---------------------------------------
  const card = tree.closest(".trace-card");
  const split = document.getElementById("trace-split");
  const SPLIT_KEY = "clawboard.trace.lane";
  function setLane(pct, keep) {
    const lane = Math.min(80, Math.max(20, Math.round(pct)));
    card.style.setProperty("--lane-w", lane + "%");
    if (split) split.setAttribute("aria-valuenow", String(lane));
    if (keep) { try { localStorage.setItem(SPLIT_KEY, String(lane)); } catch (e) { /* private mode */ } }
  }
  if (card && split) {
    try { const kept = parseInt(localStorage.getItem(SPLIT_KEY) || "", 10); if (!isNaN(kept)) setLane(kept, false); } catch (e) { /* private mode */ }
    split.addEventListener("pointerdown", (event) => {
      event.preventDefault();
      split.setPointerCapture(event.pointerId);
      split.classList.add("dragging");
      const box = card.getBoundingClientRect();
      const move = (e) => setLane(100 * (box.right - e.clientX) / box.width, false);
      const up = (e) => {
        split.classList.remove("dragging");
        split.removeEventListener("pointermove", move);
        split.removeEventListener("pointerup", up);
        setLane(parseInt(split.getAttribute("aria-valuenow"), 10), true);
      };
      split.addEventListener("pointermove", move);
      split.addEventListener("pointerup", up);
    });
    split.addEventListener("keydown", (event) => {
      const now = parseInt(split.getAttribute("aria-valuenow") || "50", 10);
      if (event.key === "ArrowLeft") setLane(now + 5, true); // the waterfall grows leftwards
      else if (event.key === "ArrowRight") setLane(now - 5, true);
      else return;
      event.preventDefault();
    });
  }

  tick();
  setInterval(tick, 200);
  const focus = tree.dataset.focus && document.getElementById("run-" + tree.dataset.focus + "-head");
  const first = focus || tree.querySelector(".node-head");
  // The selected node has the keyboard from the start: j/k and the arrows work without a click.
  if (first) select(first, { open: !!focus, focus: true });
  if (first) first.tabIndex = 0;
})();
