// Status page refresh: every few seconds, fetch the live part of the page (server-rendered
// HTML) and swap it in. Without JavaScript the page is the same, only static.
(function () {
  "use strict";
  var main = document.getElementById("live");
  var state = document.getElementById("refresh-state");
  if (!main || !window.fetch) return;
  var src = main.getAttribute("data-src");
  var every = Number(main.getAttribute("data-every")) || 2000;
  var busy = false;
  function show(text, stale) {
    if (!state) return;
    state.textContent = text;
    state.className = stale ? "stale" : "";
  }
  function tick() {
    if (busy || document.hidden) return;
    busy = true;
    fetch(src, { cache: "no-store" })
      .then(function (r) {
        if (!r.ok) throw new Error("HTTP " + r.status);
        return r.text();
      })
      .then(function (html) {
        main.innerHTML = html;
        show("auto-refresh every " + Math.round(every / 1000) + " s", false);
      })
      .catch(function () {
        show("manager unreachable: showing the last view", true);
      })
      .then(function () {
        busy = false;
      });
  }
  setInterval(tick, every);
  document.addEventListener("visibilitychange", tick);
})();
