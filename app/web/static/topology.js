// The topology page, live: every 2 s it asks /topology/live for the drawing, the counts and the
// circuits (an HTML fragment rendered by the same template as the page; 304 while nothing changed)
// and swaps it in, so circuits the controller or the TE loop lights and releases appear and go
// without a reload. The utilization chart (chart.js) announces each answer of /api/v1/utilization;
// this script overlays it on the drawing: per packet link or circuit a Mbit/s label, a width
// growing with its utilization and a colour (amber from 50 %, red from 70 %, the monitor's growth
// threshold), and the "Now" column of the circuit list.
(function () {
  "use strict";
  var box = document.getElementById("topology-live");
  if (!box) { return; }
  var chart = document.getElementById("chart");
  var status = document.getElementById("live-status");
  var src = box.getAttribute("data-src");
  var etag = null;
  var last = null;  // the newest utilization answer, re-applied after a redraw
  var STALE_MS = 15000;  // a last sample older than this is not "now" (the monitor writes every Ts = 1 s)

  function mbpsText(v) {
    return (v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2)) + " Mbit/s";
  }

  function current(key) {
    if (!last) { return null; }
    var pts = last.series[key] || [];
    if (!pts.length) { return null; }
    var p = pts[pts.length - 1];
    var asOf = last.asOf ? Date.parse(last.asOf) : Date.now();
    return asOf - Date.parse(p.time) > STALE_MS ? null : p;
  }

  function overlay() {
    box.querySelectorAll(".util-label[data-for]").forEach(function (label) {
      var key = label.getAttribute("data-for");
      var p = current(key);
      var edges = box.querySelectorAll('.edge[data-key="' + CSS.escape(key) + '"]');
      edges.forEach(function (e) {
        e.classList.remove("util-low", "util-mid", "util-high");
        e.style.strokeWidth = "";
        if (p) {
          var u = Math.max(0, Math.min(p.utilization, 1));
          e.classList.add(u >= 0.7 ? "util-high" : u >= 0.5 ? "util-mid" : "util-low");
          e.style.strokeWidth = (3 + 9 * u).toFixed(1) + "px";
        }
      });
      label.textContent = p ? mbpsText(p.mbps) : "";
      if (p) {
        label.setAttribute("data-mbps", String(p.mbps));
      } else {
        label.removeAttribute("data-mbps");
      }
    });
    box.querySelectorAll(".util-cell[data-for]").forEach(function (cell) {
      var p = current(cell.getAttribute("data-for"));
      cell.textContent = p ? mbpsText(p.mbps) + " (" + Math.round(100 * p.utilization) + " %)" : "—";
    });
  }

  document.addEventListener("mlte:utilization", function (ev) {
    last = ev.detail;
    overlay();
  });

  function refresh() {
    var headers = {"Accept": "text/html"};
    if (etag) { headers["If-None-Match"] = etag; }
    fetch(src, {credentials: "same-origin", headers: headers, cache: "no-store"})
      .then(function (r) {
        if (r.status === 304) { return null; }
        if (!r.ok) { throw new Error("HTTP " + r.status); }
        etag = r.headers.get("ETag");
        return r.text();
      })
      .then(function (html) {
        if (html !== null) {
          box.innerHTML = html;
          var state = document.getElementById("live-state");
          if (chart && state) { chart.setAttribute("data-links", state.getAttribute("data-links")); }
          overlay();
        }
        status.textContent = (status.dataset.label || "live") + " · " + new Date().toISOString().substr(11, 8) + " UTC";
        status.classList.remove("lost");
      })
      .catch(function () {
        status.textContent = "live updates lost — retrying";
        status.classList.add("lost");
      });
  }
  setInterval(refresh, 2000);
}());
