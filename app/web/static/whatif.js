// "What-if" on the reservation form: asks /api/v1/available how much bandwidth the chosen ports
// could get over the chosen window (session cookie auth) and shows it next to the button.
(function () {
  "use strict";
  var btn = document.getElementById("whatif-btn");
  var out = document.getElementById("whatif-result");
  if (!btn || !out) { return; }
  function val(id) { var el = document.getElementById(id); return el ? el.value.trim() : ""; }
  function utc(local) { return local ? local + ":00Z" : ""; }
  btn.addEventListener("click", function () {
    var params = new URLSearchParams({src: val("src"), dst: val("dst"), end: utc(val("end"))});
    if (val("start")) { params.set("start", utc(val("start"))); }
    if (val("protection") === "1+1") { params.set("protection", "1+1"); }
    out.textContent = "checking…";
    fetch(btn.getAttribute("data-api") + "?" + params.toString(), {credentials: "same-origin"})
      .then(function (r) { return r.json().then(function (d) { return {ok: r.ok, d: d}; }); })
      .then(function (res) {
        if (!res.ok) { out.textContent = res.d.error ? res.d.error.message : "error"; return; }
        var p = res.d.path;
        out.textContent = res.d.available.toFixed(2) + " Mbit/s available" +
          (p ? " via " + p.nodes.join(" → ") + " (limited by " + p.bottleneck + ")" : " (not connected)") +
          (p && p.protection ? ", protected via " + p.protection.nodes.join(" → ") : "") +
          (p && p.circuits && p.circuits.length ? (p.circuits.some(function (c) { return c.use === "rides"; })
            ? ", riding an existing circuit" : ", lighting a new circuit") : "") +
          (res.d.circuits && res.d.circuits.length ? "; booked circuits in the window: " + res.d.circuits.map(function (c) {
            return c.ends.join("–") + " " + c.free + " of " + c.capacity + " Mbit/s free";
          }).join(", ") : "");
      })
      .catch(function () { out.textContent = "request failed"; });
  });
}());
