// The console's only script: it refreshes the overview's live part, and selects every row of a list at once.
// Pages work without it, a reload away.
(function () {
  "use strict";

  function poll(el) {
    var url = el.getAttribute("data-poll");
    var every = parseInt(el.getAttribute("data-interval"), 10) || 5000;
    function tick() {
      // Not while the page is hidden, nor while the operator types in a form the refresh would replace.
      if (document.hidden || el.contains(document.activeElement)) { return; }
      fetch(url, { credentials: "same-origin", headers: { "Accept": "text/html" } })
        .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
        .then(function (html) {
          // The fragment is rendered by the server's html/template, which escaped every value in it.
          el.innerHTML = html;
          el.removeAttribute("data-stale");
        })
        .catch(function () { el.setAttribute("data-stale", "true"); });
    }
    setInterval(tick, every);
    document.addEventListener("visibilitychange", tick);
  }

  function selectAll(box) {
    box.addEventListener("change", function () {
      var form = box.closest("form");
      form.querySelectorAll('input[type="checkbox"][name="id"]').forEach(function (c) { c.checked = box.checked; });
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("[data-poll]").forEach(poll);
    document.querySelectorAll("input.js-all").forEach(selectAll);
  });
})();
