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

function formatDuration(s) {
  s = Math.max(0, Math.floor(s));
  const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), sec = s % 60;
  if (h) return `${h}h${m}m`;
  if (m) return `${m}m${sec}s`;
  return `${sec}s`;
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
