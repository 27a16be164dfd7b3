// The console's only script: filter a table's rows, and reload the page
// every 30 s when asked (remembered in this browser).
document.addEventListener("DOMContentLoaded", function () {
  document.querySelectorAll("input.filter").forEach(function (f) {
    f.addEventListener("input", function () {
      var t = document.getElementById(f.dataset.table), q = f.value.toLowerCase();
      if (!t) return;
      t.querySelectorAll("tbody tr").forEach(function (r) {
        r.style.display = r.textContent.toLowerCase().indexOf(q) >= 0 ? "" : "none";
      });
    });
  });
  var box = document.getElementById("autorefresh");
  if (!box) return;
  box.checked = localStorage.getItem("pond-autorefresh") === "1";
  var timer = null;
  function arm() {
    if (timer) clearTimeout(timer);
    timer = box.checked ? setTimeout(function () { location.reload(); }, 30000) : null;
  }
  box.addEventListener("change", function () {
    localStorage.setItem("pond-autorefresh", box.checked ? "1" : "0");
    arm();
  });
  arm();
});
