// wfctl ui: countdowns that tick, local times, the now line, live updates and confirmations.
// No framework: the server renders every page; this script only keeps an open one current.
"use strict";
(function () {
  var POLL = 500;          // ms between looks at /api/changes while the page is visible
  var HIDDEN_POLL = 5000;  // and while it is hidden
  var offset = 0;          // server clock minus this browser's, in ms
  var version = null;
  var busy = false;

  function serverNow() { return Date.now() + offset; }

  function syncClock(root) {
    var at = Date.parse(root.getAttribute("data-now"));
    if (!isNaN(at)) { offset = at - Date.now(); }
  }

  // durations.format(seconds, precision, separator=" "): a countdown keeps 3 units (it moves
  // every second), an age 2, as the terminal writes it.
  function span(seconds, precision) {
    if (seconds < 1) { return Math.round(seconds * 1000) + "ms"; }
    var remaining = Math.round(seconds), parts = [], counted = 0;
    var units = [["d", 86400], ["h", 3600], ["m", 60], ["s", 1]];
    for (var i = 0; i < units.length; i++) {
      var amount = Math.floor(remaining / units[i][1]);
      remaining -= amount * units[i][1];
      if (amount || counted) {
        counted += 1;
        if (amount && counted <= (precision || 3)) { parts.push(amount + units[i][0]); }
      }
    }
    return parts.join(" ") || "0s";
  }

  function tick() {
    var now = serverNow();
    document.querySelectorAll("[data-at]").forEach(function (el) {
      var seconds = (Date.parse(el.getAttribute("data-at")) - now) / 1000;
      var urgency = seconds <= 0 ? "expired" : seconds < 60 ? "red" : seconds < 600 ? "yellow" : "green";
      el.textContent = seconds <= 0 ? "expired " + span(-seconds) + " ago" : "in " + span(seconds);
      el.className = "countdown " + urgency;
    });
    document.querySelectorAll("[data-ago]").forEach(function (el) {
      var seconds = (now - Date.parse(el.getAttribute("data-ago"))) / 1000;
      el.textContent = seconds >= 0 ? span(seconds, 2) + " ago" : "in " + span(-seconds, 2);
    });
    document.querySelectorAll(".marker.now[data-t0]").forEach(function (g) {
      var t0 = +g.getAttribute("data-t0"), t1 = +g.getAttribute("data-t1");
      var share = Math.min(1, Math.max(0, (now - t0) / (t1 - t0)));
      // The axis places an instant by its share of the run, in percent (svg.py).
      var x = (share * 100).toFixed(2) + "%";
      g.querySelectorAll("line").forEach(function (line) {
        line.setAttribute("x1", x); line.setAttribute("x2", x);
      });
      g.querySelectorAll("text").forEach(function (text) { text.setAttribute("x", x); });
      var svg = g.ownerSVGElement;
      if (svg) {
        svg.querySelectorAll("rect[data-grow]").forEach(function (rect) {
          var width = Math.max(0, share * 100 - parseFloat(rect.getAttribute("x")));
          rect.setAttribute("width", width.toFixed(2) + "%");
        });
      }
      if (share >= 1) { refresh(); }
    });
  }

  function localTimes(root) {
    root.querySelectorAll("[data-local]").forEach(function (el) {
      var at = new Date(el.getAttribute("data-local"));
      if (!isNaN(at)) { el.textContent = at.toLocaleString() + " local"; }
    });
  }

  function state(text) {
    var el = document.getElementById("live-state");
    if (el) { el.textContent = text; }
  }

  // Fetch this page again and put its live part (and its actions, unless one is being filled
  // in) in place of the old one.
  function refresh() {
    if (busy) { return; }
    busy = true;
    fetch(location.href, {credentials: "same-origin", headers: {"Accept": "text/html"}})
      .then(function (response) { return response.ok ? response.text() : null; })
      .then(function (html) {
        if (html === null) { return; }
        var fresh = new DOMParser().parseFromString(html, "text/html");
        swap(fresh, "live", false);
        swap(fresh, "actions", true);
        syncClock(fresh.body);
        localTimes(document);
        tick();
      })
      .catch(function () { state("offline"); })
      .then(function () { busy = false; });
  }

  function swap(fresh, id, keepWhileEditing) {
    var old = document.getElementById(id), now = fresh.getElementById(id);
    if (!old || !now) { return; }
    if (keepWhileEditing && old.contains(document.activeElement) &&
        old.getAttribute("data-status") === now.getAttribute("data-status")) { return; }
    old.replaceWith(document.importNode(now, true));
  }

  function poll() {
    fetch("/api/changes", {credentials: "same-origin", cache: "no-store"})
      .then(function (response) { return response.json(); })
      .then(function (changes) {
        state("live");
        if (version !== null && changes.version !== version) { refresh(); }
        version = changes.version;
      })
      .catch(function () { state("offline"); })
      .then(function () { setTimeout(poll, document.hidden ? HIDDEN_POLL : POLL); });
  }

  // Each action asks first; the server asks again on a page of its own when this did not.
  function confirmAction(event) {
    var form = event.target;
    if (!form.matches || !form.matches("form[data-confirm]")) { return; }
    if (!window.confirm(form.getAttribute("data-confirm"))) {
      event.preventDefault();
      return;
    }
    form.querySelector("input[name=confirmed]").value = "yes";
  }

  document.addEventListener("DOMContentLoaded", function () {
    syncClock(document.body);
    version = +document.body.getAttribute("data-version");
    localTimes(document);
    tick();
    setInterval(tick, 1000);
    document.addEventListener("submit", confirmAction);
    if (document.getElementById("live")) { setTimeout(poll, POLL); }
  });
})();
