// The console's only script: it refreshes the overview's live part, keeps its "sampled … ago" counting and marks
// it stale when the console stops answering, and selects every row of a list at once. Pages work without it, a
// reload away.
(function () {
  "use strict";

  // age writes a duration as the server does: 42s, 3m 07s, 5h 02m, 3d.
  function age(ms) {
    var s = Math.max(0, Math.floor(ms / 1000));
    function two(n) { return (n < 10 ? "0" : "") + n; }
    if (s < 60) { return s + "s"; }
    if (s < 3600) { return Math.floor(s / 60) + "m " + two(s % 60) + "s"; }
    if (s < 48 * 3600) { return Math.floor(s / 3600) + "h " + two(Math.floor(s / 60) % 60) + "m"; }
    return Math.floor(s / 86400) + "d";
  }

  function setStale(el, stale) {
    var note = document.getElementById("stale");
    if (stale) {
      el.setAttribute("data-stale", "true");
    } else {
      el.removeAttribute("data-stale");
    }
    if (note) { note.hidden = !stale; }
  }

  // tickAges counts every "sampled … ago" on; a sample older than three intervals marks the page stale.
  function tickAges(el, every) {
    var oldest = 0;
    el.querySelectorAll("[data-since]").forEach(function (span) {
      var at = Date.parse(span.getAttribute("data-since"));
      if (isNaN(at) || at < Date.UTC(2000, 0, 1)) { return; }
      var ms = Date.now() - at;
      span.textContent = age(ms);
      oldest = Math.max(oldest, ms);
    });
    if (oldest > 3 * every + 2000) { setStale(el, true); }
  }

  function poll(el) {
    var url = el.getAttribute("data-poll");
    var every = parseInt(el.getAttribute("data-interval"), 10) || 5000;
    setInterval(function () { tickAges(el, every); }, 1000);
    function tick() {
      // Not while the page is hidden, nor while the operator types in a form the refresh would replace.
      if (document.hidden || el.contains(document.activeElement)) { return; }
      fetch(url, { credentials: "same-origin", headers: { "Accept": "text/html" } })
        .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
        .then(function (html) {
          // The fragment is rendered by the server's html/template, which escaped every value in it.
          el.innerHTML = html;
          setStale(el, false);
          tickAges(el, every);
        })
        .catch(function () { setStale(el, true); });
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
