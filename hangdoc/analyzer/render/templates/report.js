/* hangdoc report: rank filter, rank lookup, expand/collapse, print. No network, no eval.
   Data comes only from the JSON script tag; text is set with textContent, never as HTML. */
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("hd-data").textContent);
  var runsCache = [];
  var input = document.getElementById("hd-rank");
  var status = document.getElementById("hd-filter-status");
  var card = document.getElementById("hd-rank-card");
  var timer = null;

  /* "0-3,7,9-25:8" -> [[0,3,1],[7,7,1],[9,25,8]]; null when the text is not a rank list.
     Written as analyzer/ranges.py writes them: "a-b:s" is every s-th rank from a to b. */
  function parseRuns(text) {
    var runs = [];
    var parts = text.split(",");
    for (var i = 0; i < parts.length; i++) {
      var part = parts[i].trim();
      if (part === "") { continue; }
      var m = /^(\d+)\s*(?:-\s*(\d+)(?:\s*:\s*(\d+))?)?$/.exec(part);
      if (!m) { return null; }
      var lo = parseInt(m[1], 10);
      var hi = m[2] === undefined ? lo : parseInt(m[2], 10);
      var step = m[3] === undefined ? 1 : parseInt(m[3], 10);
      if (hi < lo || step < 1) { return null; }
      hi = lo + Math.floor((hi - lo) / step) * step;
      runs.push([lo, hi, step]);
    }
    runs.sort(function (a, b) { return a[0] - b[0]; });
    return runs;
  }

  /* Whether two runs share a rank: walk the sparser one over the overlap (bounded by
     the shorter run's count, which is small for a typed query). */
  function runsMeet(a, b) {
    var lo = Math.max(a[0], b[0]);
    var hi = Math.min(a[1], b[1]);
    if (lo > hi) { return false; }
    if (a[2] === 1 && b[2] === 1) { return true; }
    var s = a[2] >= b[2] ? a : b;
    var o = s === a ? b : a;
    var v = s[0] + Math.ceil((lo - s[0]) / s[2]) * s[2];
    for (var n = 0; v <= hi && n < 100000; v += s[2], n++) {
      if ((v - o[0]) % o[2] === 0) { return true; }
    }
    return false;
  }

  function setRuns(index) {
    var runs = runsCache[index];
    if (runs === undefined) {
      runs = parseRuns(data.rank_sets[index] || "") || [];
      runsCache[index] = runs;
    }
    return runs;
  }

  function intersects(a, b) {
    for (var i = 0; i < a.length; i++) {
      for (var j = 0; j < b.length; j++) {
        if (b[j][0] > a[i][1]) { break; }
        if (runsMeet(a[i], b[j])) { return true; }
      }
    }
    return false;
  }

  function findRank(rank) {
    var rows = data.rank_index;
    var lo = 0;
    var hi = rows.length - 1;
    while (lo <= hi) {
      var mid = (lo + hi) >> 1;
      if (rows[mid][0] === rank) { return rows[mid]; }
      if (rows[mid][0] < rank) { lo = mid + 1; } else { hi = mid - 1; }
    }
    return null;
  }

  function showCard(runs) {
    card.textContent = "";
    if (runs.length !== 1 || runs[0][0] !== runs[0][1]) { card.hidden = true; return; }
    var rank = runs[0][0];
    var row = findRank(rank);
    var title = document.createElement("strong");
    title.textContent = "Rank " + rank + ": ";
    card.appendChild(title);
    var text = "not seen in any input";
    if (row !== null) {
      text = "host " + (row[1] === null ? "unknown" : row[1]) + ", pid " + (row[2] === null ? "unknown" : row[2]);
      var tr = row[3] === null ? null : document.querySelector('tr[data-row="' + row[3] + '"]');
      if (tr !== null && tr.cells.length > 2) { text += " — " + tr.cells[2].textContent.trim(); }
    }
    card.appendChild(document.createTextNode(text));
    card.hidden = false;
  }

  function apply(query) {
    var targets = document.querySelectorAll("[data-rset]");
    var text = query.trim();
    var runs = text === "" ? [] : parseRuns(text);
    status.className = "";
    if (runs === null) {
      status.textContent = "not a rank list";
      status.className = "bad";
      return;
    }
    var shown = 0;
    for (var i = 0; i < targets.length; i++) {
      var el = targets[i];
      var match = runs.length === 0 || intersects(runs, setRuns(parseInt(el.getAttribute("data-rset"), 10)));
      el.classList.toggle("hd-out", !match);
      if (match) {
        shown++;
        if (runs.length > 0 && el.tagName === "LI" && el.firstElementChild && el.firstElementChild.tagName === "DETAILS") {
          el.firstElementChild.open = true;
        }
      }
    }
    status.textContent = runs.length === 0 ? "" : shown + " of " + targets.length + " items";
    showCard(runs);
  }

  input.addEventListener("input", function () {
    if (timer !== null) { clearTimeout(timer); }
    timer = setTimeout(function () { timer = null; apply(input.value); }, 120);
  });
  document.getElementById("hd-filter").addEventListener("submit", function (ev) {
    ev.preventDefault();
    apply(input.value);
  });
  document.getElementById("hd-clear").addEventListener("click", function () {
    input.value = "";
    apply("");
  });

  function toggleAll(selector, open) {
    var all = document.querySelectorAll(selector + " details");
    for (var i = 0; i < all.length; i++) { all[i].open = open; }
  }
  var buttons = document.querySelectorAll("[data-expand],[data-collapse]");
  for (var b = 0; b < buttons.length; b++) {
    buttons[b].addEventListener("click", function (ev) {
      var el = ev.currentTarget;
      var expand = el.hasAttribute("data-expand");
      toggleAll(el.getAttribute(expand ? "data-expand" : "data-collapse"), expand);
    });
  }

  /* Closed <details> do not print: open them all for printing, then restore. */
  var closedForPrint = [];
  window.addEventListener("beforeprint", function () {
    var all = document.querySelectorAll("details:not([open])");
    closedForPrint = [];
    for (var i = 0; i < all.length; i++) { all[i].open = true; closedForPrint.push(all[i]); }
  });
  window.addEventListener("afterprint", function () {
    for (var i = 0; i < closedForPrint.length; i++) { closedForPrint[i].open = false; }
    closedForPrint = [];
  });

  var hash = /^#ranks?=([0-9,:\- ]+)$/.exec(decodeURIComponent(window.location.hash));
  if (hash) {
    input.value = hash[1];
    apply(hash[1]);
  }
}());
