// Live utilization chart: polls /api/v1/utilization (session cookie auth) every 2 s for the links in
// #chart's data-links (re-read on every poll, so the topology page can add a circuit that was just
// lit) and draws one SVG polyline per link. Each answer is also announced as the document event
// "mlte:utilization" ({series, asOf}) for the topology overlay. No library: plain SVG.
var MlteChart = (function () {
  "use strict";

  // Tick values a person reads at a glance: 0, step, 2·step, … up to the first tick ≥ vmax, with
  // step 1, 2, 2.5 or 5 × 10^k (4 to 5 intervals) and as many decimals as the step needs, so the
  // ticks of a 0..1 axis read 0, 0.25, 0.5, 0.75, 1 (rounding to one decimal gave 0.3 and 0.8).
  function niceTicks(vmax, intervals) {
    intervals = intervals || 4;
    if (!(vmax > 0) || !isFinite(vmax)) { vmax = 1; }
    var raw = vmax / intervals;
    var mag = Math.pow(10, Math.floor(Math.log10(raw)));
    var step = mag * 10;
    [1, 2, 2.5, 5, 10].some(function (m) {
      if (m * mag >= raw * (1 - 1e-9)) { step = m * mag; return true; }
      return false;
    });
    var decimals = Math.max(0, -Math.floor(Math.log10(step) + 1e-9)) + ((step / mag) % 1 ? 1 : 0);
    var n = Math.max(1, Math.ceil(vmax / step - 1e-9));  // the last tick is the first one >= vmax
    var ticks = [];
    for (var i = 0; i <= n; i++) {
      var v = i * step;
      ticks.push({value: v, label: String(Number(v.toFixed(decimals)))});
    }
    return ticks;
  }

  return {niceTicks: niceTicks};
}());

if (typeof module !== "undefined") { module.exports = MlteChart; }  // node, for the unit test

(function () {
  "use strict";
  if (typeof document === "undefined") { return; }
  var el = document.getElementById("chart");
  if (!el) { return; }
  var api = el.getAttribute("data-api");
  var colors = ["#e0287a", "#2f6fde", "#12a150", "#b4532a", "#7b3fe4", "#0e9aa7", "#c28f00", "#555"];
  // series after the first are dashed, each its own way, so two at equal rates (drawn on top of each
  // other) still both show: the earlier one's colour shows through the later one's gaps
  var dashes = ["", "8 5", "3 4", "12 4 3 4", "2 7", "16 6"];
  var NS = "http://www.w3.org/2000/svg";
  var W = 900, H = 240, L = 48, R = 12, T = 12, B = 28;

  function links() { return JSON.parse(el.getAttribute("data-links") || "[]"); }

  function node(tag, attrs, text) {
    var n = document.createElementNS(NS, tag);
    Object.keys(attrs).forEach(function (k) { n.setAttribute(k, attrs[k]); });
    if (text !== undefined) { n.textContent = text; }
    return n;
  }

  function draw(names, series) {
    var svg = node("svg", {viewBox: "0 0 " + W + " " + H, role: "img", "aria-label": "link utilization"});
    var tmin = Infinity, tmax = -Infinity, vmax = 0;
    names.forEach(function (l) {
      (series[l] || []).forEach(function (p) {
        var t = Date.parse(p.time);
        tmin = Math.min(tmin, t); tmax = Math.max(tmax, t); vmax = Math.max(vmax, p.mbps);
      });
    });
    if (!isFinite(tmin)) { tmax = Date.now(); tmin = tmax - 300000; }
    if (tmax === tmin) { tmin = tmax - 1000; }
    var ticks = MlteChart.niceTicks(vmax);
    var top = ticks[ticks.length - 1].value;
    function x(t) { return L + (W - L - R) * (t - tmin) / (tmax - tmin); }
    function y(v) { return H - B - (H - T - B) * v / top; }
    ticks.forEach(function (tick) {
      svg.appendChild(node("line", {"class": "grid", x1: L, x2: W - R, y1: y(tick.value), y2: y(tick.value)}));
      svg.appendChild(node("text", {"class": "ytick", x: L - 6, y: y(tick.value) + 4, "text-anchor": "end"}, tick.label));
    });
    svg.appendChild(node("line", {"class": "axis", x1: L, x2: L, y1: T, y2: H - B}));
    svg.appendChild(node("line", {"class": "axis", x1: L, x2: W - R, y1: H - B, y2: H - B}));
    svg.appendChild(node("text", {x: L, y: H - 8}, new Date(tmin).toISOString().substr(11, 8)));
    svg.appendChild(node("text", {x: W - R, y: H - 8, "text-anchor": "end"}, new Date(tmax).toISOString().substr(11, 8) + " UTC"));
    svg.appendChild(node("text", {x: 4, y: (H - B + T) / 2, transform: "rotate(-90 12 " + (H - B + T) / 2 + ")"}, "Mbit/s"));
    var legend = document.createElement("div");
    legend.className = "chart-legend";
    var samples = 0;
    names.forEach(function (l, i) {
      var pts = (series[l] || []).map(function (p) { return x(Date.parse(p.time)).toFixed(1) + "," + y(p.mbps).toFixed(1); });
      samples += pts.length;
      var color = colors[i % colors.length];
      var dash = dashes[i % dashes.length];
      if (pts.length) {
        var line = node("polyline", {"class": "series", points: pts.join(" "), stroke: color, "data-link": l});
        if (dash) { line.setAttribute("stroke-dasharray", dash); }
        svg.appendChild(line);
      }
      var s = document.createElement("span");
      s.style.color = color;
      var key = node("svg", {width: 24, height: 8, "class": "key", "aria-hidden": "true"});
      var keyLine = node("line", {x1: 0, x2: 24, y1: 4, y2: 4, stroke: color, "stroke-width": 2});
      if (dash) { keyLine.setAttribute("stroke-dasharray", dash); }
      key.appendChild(keyLine);
      s.appendChild(key);
      s.appendChild(document.createTextNode(" " + l));
      legend.appendChild(s);
    });
    el.replaceChildren(svg, legend);
    el.setAttribute("data-samples", String(samples));
    if (!samples) {
      var p = document.createElement("p");
      p.className = "hint";
      p.textContent = names.length
        ? "No utilization samples for these links in the last 5 minutes (the controller's monitor writes them)."
        : "No monitored link: the monitor samples packet links and lit circuits.";
      el.appendChild(p);
    }
  }

  function poll() {
    var names = links();
    if (!names.length) { draw(names, {}); return; }
    var qs = names.map(function (l) { return "link=" + encodeURIComponent(l); }).join("&");
    fetch(api + "?" + qs, {credentials: "same-origin", headers: {"Accept": "application/json"}})
      .then(function (r) { return r.ok ? r.json() : {series: {}}; })
      .then(function (d) {
        draw(names, d.series || {});
        document.dispatchEvent(new CustomEvent("mlte:utilization", {detail: {series: d.series || {}, asOf: d.as_of}}));
      })
      .catch(function () { /* keep the last picture; next poll retries */ });
  }
  poll();
  setInterval(poll, 2000);
}());
