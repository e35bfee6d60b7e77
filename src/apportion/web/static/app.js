// apportion dashboard: charts (uPlot), auto-submitting filter forms, live status.
// No inline scripts: the pages' Content-Security-Policy allows scripts from this site only.
(function () {
  "use strict";

  function hue(team) {
    // the same colour as the server's team_colour (crc32 of the name, mod 360)
    var c, crc = 0 ^ -1;
    var bytes = new TextEncoder().encode(team);
    for (var i = 0; i < bytes.length; i++) {
      c = (crc ^ bytes[i]) & 0xff;
      for (var k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ 0xedb88320 : c >>> 1;
      crc = (crc >>> 8) ^ c;
    }
    return ((crc ^ -1) >>> 0) % 360;
  }

  function colour(team, alpha) {
    if (team === "other") return alpha ? "rgba(150,150,150," + alpha + ")" : "rgb(150,150,150)";
    return "hsl(" + hue(team) + " 55% 55%" + (alpha ? " / " + alpha : "") + ")";
  }

  function drawChart(el) {
    if (typeof uPlot === "undefined") return;
    var data = JSON.parse(el.getAttribute("data-chart"));
    el.innerHTML = "";
    if (!data.series.length) {
      el.innerHTML = '<p class="empty">No GPU was allocated in this window.</p>';
      return;
    }
    // Stacked: each series is drawn as the running total up to it, largest last
    // drawn first so every band stays visible; the legend shows each team's own value.
    var raw = data.series.map(function (s) { return s.values; });
    var cum = [], run = data.t.map(function () { return 0; });
    raw.forEach(function (vals) {
      run = run.map(function (v, i) { return v + vals[i]; });
      cum.push(run.slice());
    });
    var order = cum.map(function (_, i) { return i; }).reverse();
    var series = [{}], rows = [data.t];
    order.forEach(function (i) {
      var team = data.series[i].team;
      series.push({
        label: team, stroke: colour(team), fill: colour(team, 0.85), width: 1,
        points: { show: false },
        value: function (u, v, si, idx) { return idx == null ? "-" : raw[i][idx].toFixed(2); }
      });
      rows.push(cum[i]);
    });
    var width = Math.max(320, el.clientWidth || 600);
    new uPlot({
      width: width, height: 220, series: series,
      axes: [{}, { label: el.getAttribute("data-unit") || "", size: 50 }],
      scales: { x: { time: true } }, cursor: { drag: { x: false, y: false } },
      // times in UTC, like every time the server prints
      tzDate: function (ts) { return uPlot.tzDate(new Date(ts * 1e3), "Etc/UTC"); },
      legend: { live: true }
    }, rows, el);
  }

  function init(root) {
    (root.querySelectorAll ? root : document).querySelectorAll(".chart[data-chart]").forEach(drawChart);
    if (root.matches && root.matches(".chart[data-chart]")) drawChart(root);
  }

  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("form.autosubmit select").forEach(function (sel) {
      sel.addEventListener("change", function () { sel.form.submit(); });
    });
    if (window.htmx) {
      // swap error pages too (a 403/404/422 partial says what went wrong)
      htmx.config.responseHandling = [
        { code: "204", swap: false },
        { code: "[23]..", swap: true },
        { code: "[45]..", swap: true, error: true }
      ];
      htmx.onLoad(init);
    } else {
      init(document);
    }
    var main = document.querySelector("main[sse-connect]");
    if (main) {
      document.body.addEventListener("htmx:sseOpen", function () { document.body.classList.add("is-live"); });
      document.body.addEventListener("htmx:sseError", function () { document.body.classList.remove("is-live"); });
      document.body.addEventListener("htmx:sseMessage", function (e) {
        document.body.setAttribute("data-last-change", (e.detail && e.detail.data) || "");
      });
    }
  });
})();
