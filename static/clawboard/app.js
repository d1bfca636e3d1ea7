// Shared page behaviour. Live run trees are in live.js.
document.addEventListener("DOMContentLoaded", () => {
  // Ticking durations: any element with data-started (ISO) and no data-finished.
  const tick = () => {
    document.querySelectorAll("[data-started]").forEach((el) => {
      if (el.dataset.finished) return;
      const started = Date.parse(el.dataset.started);
      if (!isNaN(started)) el.textContent = formatDuration((Date.now() - started) / 1000);
    });
  };
  setInterval(tick, 1000);
  tick();
});

// The same format as the `duration` template filter (runs_app/templatetags/clawboard.py):
// `42 ms`, `1.23 s`, `1m 05s`, `1h 02m`.
function formatDuration(s) {
  s = Math.max(0, s);
  if (s < 1) return `${Math.floor(s * 1000)} ms`;
  if (s < 60) return `${(Math.floor(s * 100) / 100).toFixed(2)} s`; // floored, as the filter
  const whole = Math.floor(s);
  const h = Math.floor(whole / 3600), m = Math.floor((whole % 3600) / 60), sec = whole % 60;
  if (h) return `${h}h ${String(m).padStart(2, "0")}m`;
  return `${m}m ${String(sec).padStart(2, "0")}s`;
}
window.formatDuration = formatDuration;

// Approvals inbox: the header checkbox ticks every pending approval for a bulk decision;
// the count says how many a click will decide.
document.addEventListener("change", (event) => {
  const target = event.target;
  if (!(target instanceof HTMLInputElement)) return;
  if (target.id === "bulk-all") {
    document.querySelectorAll("input.bulk-pick").forEach((box) => { box.checked = target.checked; });
  }
  if (target.id === "bulk-all" || target.classList.contains("bulk-pick")) {
    const n = document.querySelectorAll("input.bulk-pick:checked").length;
    const count = document.getElementById("bulk-count");
    if (count) count.textContent = n ? `${n} selected:` : "Tick approvals below, then decide them together:";
  }
});

// Config import: Import is enabled only by a preview without errors of the form as it is now
// (any change disables it again), and it asks before applying.
const IMPORT_CONFIRM = "Apply the previewed changes to the configuration? The current one stays in the revisions, so it can be restored.";
document.addEventListener("htmx:afterSwap", (event) => {
  if (!(event.target instanceof HTMLElement) || event.target.id !== "import-result") return;
  const apply = document.getElementById("import-apply");
  if (apply) apply.disabled = !document.getElementById("import-ready");
});
["input", "change"].forEach((type) => document.addEventListener(type, (event) => {
  const form = event.target instanceof HTMLElement ? event.target.closest("#import-form") : null;
  const apply = document.getElementById("import-apply");
  if (form && apply) apply.disabled = true;
}));
document.addEventListener("submit", (event) => {
  if (event.target instanceof HTMLFormElement && event.target.id === "import-form" && !window.confirm(IMPORT_CONFIRM)) {
    event.preventDefault();
  }
});
