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
    // Live parts (overview, limit panel, operator view): every few seconds the page asks
    // its JSON endpoint for the parts marked data-live, rendered by the server like the
    // page, and swaps them in; not while the tab is hidden, and never two requests at
    // once. Without JavaScript the page refreshes itself every 30 s (a noscript meta).
    var src = document.body.getAttribute("data-live-src");
    if (src) {
      var every = (parseInt(document.body.getAttribute("data-live-seconds"), 10) || 3) * 1000;
      var names = [];
      document.querySelectorAll("[data-live]").forEach(function (el) {
        names.push(el.getAttribute("data-live"));
      });
      var busy = false, timer = null;
      var poll = function () {
        if (busy || document.visibilityState !== "visible") { return; }
        busy = true;
        fetch(src + "?parts=" + encodeURIComponent(names.join(",")),
              {credentials: "same-origin", headers: {"Accept": "application/json"}})
          .then(function (response) {
            if (!response.ok) { throw new Error("status " + response.status); }
            return response.json();
          })
          .then(function (body) {
            Object.keys(body.parts).forEach(function (name) {
              var el = document.querySelector('[data-live="' + name + '"]');
              if (el) { el.innerHTML = body.parts[name]; }   // server-rendered, escaped
            });
            document.body.setAttribute("data-live-at", body.at);
          })
          .catch(function () {
            // a lapsed session (401) or a stopped server: stop asking, say so
            window.clearInterval(timer);
            document.querySelectorAll(".live-note").forEach(function (note) {
              note.textContent = "live refresh stopped: reload the page";
            });
          })
          .then(function () { busy = false; });
      };
      timer = window.setInterval(poll, every);
    }
  });
})();
