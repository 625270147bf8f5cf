// Live utilization chart of a reservation's links: polls /api/v1/utilization (session cookie auth)
// every 2 s and draws one SVG polyline per link. No library: the chart is ~100 lines of SVG.
(function () {
  "use strict";
  var el = document.getElementById("chart");
  if (!el) { return; }
  var links = JSON.parse(el.getAttribute("data-links") || "[]");
  var api = el.getAttribute("data-api");
  var colors = ["#e0287a", "#2f6fde", "#12a150", "#b4532a", "#7b3fe4", "#0e9aa7", "#c28f00", "#555"];
  var NS = "http://www.w3.org/2000/svg";
  var W = 900, H = 240, L = 48, R = 12, T = 12, B = 28;

  function node(tag, attrs, text) {
    var n = document.createElementNS(NS, tag);
    Object.keys(attrs).forEach(function (k) { n.setAttribute(k, attrs[k]); });
    if (text !== undefined) { n.textContent = text; }
    return n;
  }

  function draw(series) {
    var svg = node("svg", {viewBox: "0 0 " + W + " " + H, role: "img", "aria-label": "link utilization"});
    var tmin = Infinity, tmax = -Infinity, vmax = 0;
    links.forEach(function (l) {
      (series[l] || []).forEach(function (p) {
        var t = Date.parse(p.time);
        tmin = Math.min(tmin, t); tmax = Math.max(tmax, t); vmax = Math.max(vmax, p.mbps);
      });
    });
    if (!isFinite(tmin)) { tmax = Date.now(); tmin = tmax - 300000; }
    if (tmax === tmin) { tmin = tmax - 1000; }
    vmax = vmax > 0 ? vmax * 1.1 : 1;
    function x(t) { return L + (W - L - R) * (t - tmin) / (tmax - tmin); }
    function y(v) { return H - B - (H - T - B) * v / vmax; }
    for (var i = 0; i <= 4; i++) {
      var v = vmax * i / 4;
      svg.appendChild(node("line", {"class": "grid", x1: L, x2: W - R, y1: y(v), y2: y(v)}));
      svg.appendChild(node("text", {x: L - 6, y: y(v) + 4, "text-anchor": "end"}, v.toFixed(v < 10 ? 1 : 0)));
    }
    svg.appendChild(node("line", {"class": "axis", x1: L, x2: L, y1: T, y2: H - B}));
    svg.appendChild(node("line", {"class": "axis", x1: L, x2: W - R, y1: H - B, y2: H - B}));
    svg.appendChild(node("text", {x: L, y: H - 8}, new Date(tmin).toISOString().substr(11, 8)));
    svg.appendChild(node("text", {x: W - R, y: H - 8, "text-anchor": "end"}, new Date(tmax).toISOString().substr(11, 8) + " UTC"));
    svg.appendChild(node("text", {x: 4, y: (H - B + T) / 2, transform: "rotate(-90 12 " + (H - B + T) / 2 + ")"}, "Mbit/s"));
    var legend = document.createElement("div");
    legend.className = "chart-legend";
    var samples = 0;
    links.forEach(function (l, i) {
      var pts = (series[l] || []).map(function (p) { return x(Date.parse(p.time)).toFixed(1) + "," + y(p.mbps).toFixed(1); });
      samples += pts.length;
      var color = colors[i % colors.length];
      if (pts.length) {
        svg.appendChild(node("polyline", {"class": "series", points: pts.join(" "), stroke: color, "data-link": l}));
      }
      var s = document.createElement("span");
      s.style.color = color;
      s.textContent = "■ " + l;
      legend.appendChild(s);
    });
    el.replaceChildren(svg, legend);
    el.setAttribute("data-samples", String(samples));
    if (!samples) {
      var p = document.createElement("p");
      p.className = "hint";
      p.textContent = "No utilization samples for these links in the last 5 minutes (the controller's monitor writes them).";
      el.appendChild(p);
    }
  }

  function poll() {
    if (!links.length) { draw({}); return; }
    var qs = links.map(function (l) { return "link=" + encodeURIComponent(l); }).join("&");
    fetch(api + "?" + qs, {credentials: "same-origin", headers: {"Accept": "application/json"}})
      .then(function (r) { return r.ok ? r.json() : {series: {}}; })
      .then(function (d) { draw(d.series || {}); })
      .catch(function () { /* keep the last picture; next poll retries */ });
  }
  poll();
  setInterval(poll, 2000);
}());
