// The reservation form's endpoint pickers: choosing a host or a switch port of the topology beside
// the source/destination field puts its port into the field (typing stays possible, and the picker
// follows what is typed when it names one of its ports).
(function () {
  "use strict";
  document.querySelectorAll("select.endpoint-picker").forEach(function (picker) {
    var input = document.getElementById(picker.getAttribute("data-for"));
    if (!input) { return; }
    picker.addEventListener("change", function () {
      if (picker.value) {
        input.value = picker.value;
        input.dispatchEvent(new Event("input", {bubbles: true}));
      }
    });
    function follow() {
      var typed = input.value.trim();
      var match = Array.prototype.some.call(picker.options, function (o) { return o.value === typed; });
      if (!match) { picker.value = ""; return; }
      if (picker.value !== typed) { picker.value = typed; }
    }
    input.addEventListener("input", follow);
    follow();
  });
}());
