// Home page charts: runs, tokens and cost over time, per agent or per model, drawn with the
// vendored uPlot (static/vendor/uplot). Data: the page's #usage-data, then /home/charts/.
(function () {
  "use strict";
  const PALETTE_LIGHT = ["#3b5bdb", "#e8590c", "#2b8a3e", "#c2255c", "#7048e8", "#1098ad", "#e67700", "#5c940d", "#862e9c", "#495057"];
  const PALETTE_DARK = ["#91a7ff", "#ffa94d", "#8ce99a", "#faa2c1", "#b197fc", "#66d9e8", "#ffd43b", "#c0eb75", "#e599f7", "#ced4da"];
  const state = { window: "24h", group: "agent", data: null, plots: [] };

  const css = (name) => getComputedStyle(document.documentElement).getPropertyValue(name).trim();
  const dark = () => window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches;

  function money(v) {
    if (v == null) return "";
    const a = Math.abs(v);
    if (a === 0) return "$0.00";
    return (v < 0 ? "-$" : "$") + (a < 0.01 ? a.toFixed(4) : a.toLocaleString("en-US", { minimumFractionDigits: 2, maximumFractionDigits: 2 }));
  }
  const count = (v) => (v == null ? "" : Math.round(v).toLocaleString("en-US"));
  const format = { runs: count, tokens: count, cost: money };

  function draw() {
    state.plots.forEach((p) => p.destroy());
    state.plots = [];
    if (!state.data || typeof uPlot === "undefined") return;
    const win = state.data[state.window];
    const palette = dark() ? PALETTE_DARK : PALETTE_LIGHT;
    const axisColor = css("--fg") || "#1d2330";
    const gridColor = css("--line") || "#d9dde5";
    document.querySelectorAll("#usage-charts .chart").forEach((el) => {
      const metric = el.dataset.metric;
      const series = win[state.group][metric];
      const names = Object.keys(series);
      const fmt = format[metric];
      const width = Math.max(280, el.clientWidth || 400);
      const axis = {
        stroke: axisColor,
        font: "13px system-ui, sans-serif",
        grid: { stroke: gridColor, width: 1 },
        ticks: { stroke: gridColor },
      };
      const opts = {
        width,
        height: 220,
        legend: { show: true },
        cursor: { points: { size: 7 } },
        scales: { x: { time: true }, y: { range: (u, min, max) => [0, Math.max(max, metric === "cost" ? 0.01 : 1)] } },
        axes: [
          { ...axis, values: (u, ticks) => ticks.map((t) => { const d = new Date(t * 1000); return state.window === "24h" ? `${String(d.getUTCHours()).padStart(2, "0")}:00` : `${d.getUTCMonth() + 1}/${d.getUTCDate()}`; }) },
          { ...axis, size: 70, values: (u, ticks) => ticks.map(fmt) },
        ],
        series: [
          { value: (u, t) => (t == null ? "" : new Date(t * 1000).toISOString().slice(0, 16).replace("T", " ") + " UTC") },
          ...names.map((name, i) => ({ label: name, stroke: palette[i % palette.length], width: 2, points: { show: true, size: 5 }, value: (u, v) => fmt(v) })),
        ],
      };
      const rows = [win.t, ...names.map((n) => series[n])];
      el.innerHTML = "";
      if (!names.length) { el.innerHTML = '<p class="muted chart-empty">No runs in this window.</p>'; return; }
      state.plots.push(new uPlot(opts, rows, el));
    });
    document.querySelectorAll("#usage-charts [data-window]").forEach((b) => b.setAttribute("aria-pressed", String(b.dataset.window === state.window)));
    document.querySelectorAll("#usage-charts [data-group]").forEach((b) => b.setAttribute("aria-pressed", String(b.dataset.group === state.group)));
  }

  function reload() {
    fetch("/home/charts/", { credentials: "same-origin" })
      .then((r) => (r.ok ? r.json() : null))
      .then((d) => { if (d) { state.data = d; draw(); } })
      .catch(() => {});
  }

  document.addEventListener("DOMContentLoaded", () => {
    const holder = document.getElementById("usage-data");
    if (!holder) return;
    state.data = JSON.parse(holder.textContent);
    document.querySelectorAll("#usage-charts [data-window]").forEach((b) => b.addEventListener("click", () => { state.window = b.dataset.window; draw(); }));
    document.querySelectorAll("#usage-charts [data-group]").forEach((b) => b.addEventListener("click", () => { state.group = b.dataset.group; draw(); }));
    let timer = null;
    window.addEventListener("resize", () => { clearTimeout(timer); timer = setTimeout(draw, 150); });
    if (window.matchMedia) window.matchMedia("(prefers-color-scheme: dark)").addEventListener("change", draw);
    draw();
    setInterval(reload, 60000);
  });
})();
