// crondepot console: the little JavaScript it has. Everything works without it.
(function () {
  "use strict";
  document.addEventListener("DOMContentLoaded", function () {
    // Dead letter: a header checkbox ticks every row shown.
    var all = document.getElementById("select-all");
    if (all) {
      all.addEventListener("change", function () {
        document.querySelectorAll("input.pick").forEach(function (box) {
          box.checked = all.checked;
        });
      });
    }
    // Buttons that ask first.
    document.querySelectorAll("[data-confirm]").forEach(function (el) {
      el.addEventListener("click", function (event) {
        if (!window.confirm(el.getAttribute("data-confirm"))) { event.preventDefault(); }
      });
    });
    // The overview refreshes itself (not while the tab is hidden).
    var refresh = document.querySelector("[data-refresh]");
    if (refresh) {
      var seconds = parseInt(refresh.getAttribute("data-refresh"), 10) || 30;
      window.setInterval(function () {
        if (document.visibilityState === "visible") { window.location.reload(); }
      }, seconds * 1000);
    }
  });
})();
