// ingot dashboard: small enhancements over server-rendered pages, each
// optional (every page reads the same without JavaScript).
//  - <time datetime> shows the browser's local time on hover.
//  - [data-stream] follows a running job by server-sent events: the
//    progress bar, its text and the phase bar move; when the job (or the
//    session) ends, the page reloads to show the result.
(function () {
  "use strict";
  function localTimes(root) {
    root.querySelectorAll("time[datetime]").forEach(function (t) {
      var d = new Date(t.getAttribute("datetime"));
      if (!isNaN(d)) { t.title = d.toLocaleString() + " (your local time)"; }
    });
  }
  function follow(el) {
    var url = el.getAttribute("data-stream");
    if (!url || !window.EventSource) { return; }
    var es = new EventSource(url);
    var bar = el.querySelector("progress");
    var text = el.querySelector('[data-field="text"]');
    var phases = el.querySelector('[data-field="phases"]');
    es.addEventListener("open", function () { // counted: a stream that holds opens once
      el.setAttribute("data-opens", String(Number(el.getAttribute("data-opens") || 0) + 1));
    });
    es.addEventListener("progress", function (e) {
      var p = JSON.parse(e.data);
      if (bar) { bar.max = p.total > 0 ? p.total : 1; bar.value = p.bytes; bar.textContent = p.percent + "%"; }
      if (text) { text.textContent = p.text; }
      if (phases && p.phases_html) { phases.innerHTML = p.phases_html; }
      el.setAttribute("data-percent", String(p.percent));
      el.setAttribute("data-state", p.state);
    });
    es.addEventListener("end", function (e) {
      es.close();
      el.setAttribute("data-ended", JSON.parse(e.data).why);
      window.setTimeout(function () { window.location.reload(); }, 300);
    });
    es.onerror = function () {
      if (es.readyState === EventSource.CLOSED) { el.setAttribute("data-ended", "error"); }
    };
  }
  function init(root) {
    localTimes(root);
    root.querySelectorAll("[data-stream]").forEach(follow);
  }
  document.addEventListener("DOMContentLoaded", function () { init(document); });
  document.addEventListener("htmx:afterSwap", function (e) { localTimes(e.target); });
})();
