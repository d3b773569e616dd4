// plot.js: the page's line plots, plain SVG from a few lines of our own (no library, no
// CDN: the UI works offline). A plot is a function of its points: the page redraws it on
// every refresh, so there is no state to keep in step.
"use strict";

const Plot = (() => {
  const W = 340, H = 160, L = 52, R = 12, T = 38, B = 22;  // size and margins (px)

  // a round step for about `n` ticks up to `max` (1, 2 or 5 x a power of ten)
  function niceStep(max, n) {
    const raw = max / n, p = Math.pow(10, Math.floor(Math.log10(raw)));
    return [1, 2, 5, 10].map(m => m * p).find(s => s >= raw);
  }

  function short(v) {
    const a = Math.abs(v);
    if (a >= 1e6) return (v / 1e6).toFixed(a >= 1e7 ? 0 : 1) + "M";
    if (a >= 1e3) return (v / 1e3).toFixed(a >= 1e4 ? 0 : 1) + "k";
    if (a >= 10 || v === 0) return String(Math.round(v));
    return v.toPrecision(2);
  }

  function esc(s) {
    return String(s).replace(/[&<>"]/g, c => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" }[c]));
  }

  // lines: [{name, color, values: [[secondsAgo, y or null], ...]}]; window: seconds shown;
  // unit: a suffix for the y axis ("/s", " ms", "%"); yMax: a fixed top (else the data's)
  function svg(id, title, lines, window, unit, yMax) {
    const ys = lines.flatMap(l => l.values.map(v => v[1]).filter(y => y !== null));
    // nothing yet (or all 0): an axis up to 1, not one of 1e-9s
    const top = yMax !== undefined ? yMax : Math.max(...ys, 0) || 1;
    const step = niceStep(top, 4), ymax = yMax !== undefined ? yMax : Math.ceil(top / step) * step;
    const x = ago => L + (W - L - R) * (1 - ago / window);
    const y = v => T + (H - T - B) * (1 - v / ymax);
    const n = Math.max(0, ...lines.map(l => l.values.length));
    let s = `<svg class="plot" id="${esc(id)}" data-points="${n}" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" role="img" aria-label="${esc(title)}">`;
    s += `<text class="plot-title" x="8" y="15">${esc(title)}</text>`;
    for (let i = 0; i * step <= ymax * (1 + 1e-9); i++) {
      const v = i * step;
      s += `<line class="grid" x1="${L}" x2="${W - R}" y1="${y(v)}" y2="${y(v)}"/>` +
           `<text class="tick" x="${L - 4}" y="${y(v) + 4}" text-anchor="end">${short(v)}${unit}</text>`;
    }
    for (let i = 0; i <= 4; i++) {
      const ago = window * (1 - i / 4);
      s += `<text class="tick" x="${x(ago)}" y="${H - 6}" text-anchor="middle">${!ago ? "now" : window <= 120 ? "-" + short(ago) + "s" : "-" + short(ago / 60) + "m"}</text>`;
    }
    lines.forEach((l, k) => {
      // a gap where a value is missing (no tree acked: no latency), not a drop to 0
      let d = "", pen = "M";
      l.values.forEach(([ago, v]) => {
        if (v === null) { pen = "M"; return; }
        d += `${pen}${x(ago).toFixed(1)},${y(Math.min(v, ymax)).toFixed(1)}`;
        pen = "L";
      });
      s += `<path class="line" data-series="${esc(l.name)}" d="${d}" stroke="${l.color}"/>`;
      const last = l.values.filter(v => v[1] !== null).slice(-1)[0];
      if (last) s += `<circle cx="${x(last[0]).toFixed(1)}" cy="${y(Math.min(last[1], ymax)).toFixed(1)}" r="2.5" fill="${l.color}"/>`;
      s += `<text class="legend" x="${8 + k * 150}" y="30" fill="${l.color}">${esc(l.name)}${!last ? "" : yMax !== undefined && last[1] > yMax ? " >" + short(yMax) + unit : " " + short(last[1]) + unit}</text>`;
    });
    return s + "</svg>";
  }

  // the standard set of a topology's or a component's plots from its series points
  function panel(prefix, points, window, kind) {
    const col = key => points.map(p => [p.ago, p[key]]);
    const pct = key => points.map(p => [p.ago, p[key] === null ? null : p[key] * 100]);
    const rates = kind === "bolt"
      ? [{ name: "executed", color: "#1f77b4", values: col("executed") }, { name: "emitted", color: "#2ca02c", values: col("emitted") }]
      : [{ name: "emitted", color: "#2ca02c", values: col("emitted") }, { name: "acked", color: "#1f77b4", values: col("acked") }];
    const plots = [svg(prefix + "-rates", "rates (tuples/s)", rates, window, "/s")];
    if (kind !== "bolt") {
      plots.push(svg(prefix + "-latency", "complete latency (ms)", [
        { name: "p50", color: "#9467bd", values: col("completeLatencyP50") },
        { name: "p99", color: "#d62728", values: col("completeLatencyP99") },
        { name: "mean", color: "#7f7f7f", values: col("completeLatency") },
      ], window, " ms"));
    }
    plots.push(svg(prefix + "-queue", "receive queue fill (fullest task)", [{ name: "queue", color: "#ff7f0e", values: pct("queueFill") }], window, "%", 100));
    plots.push(svg(prefix + "-bp", "busy and backpressure (% of time)", [
      { name: "busy", color: "#d62728", values: pct("capacity") },
      { name: "backpressure", color: "#6b4fbb", values: pct("backpressure") },
    ], window, "%", 100));
    return `<div class="plots">${plots.join("")}</div>`;
  }

  return { svg, panel, short };
})();
