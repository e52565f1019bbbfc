package popups

import (
	"encoding/json"
	"fmt"
	"strings"
)

// scriptJSONEscapes keep embedded JSON from ending the script or its string: a "<" could
// start "</script>" or "<!--" in an inline copy, and U+2028 and U+2029 end a line in older
// JavaScript. encoding/json already escapes all five; this holds whatever encoded the data.
var scriptJSONEscapes = strings.NewReplacer(
	"<", `\u003c`,
	">", `\u003e`,
	"&", `\u0026`,
	"\u2028", `\u2028`,
	"\u2029", `\u2029`,
)

// scriptJSON encodes v as JSON that is safe inside a script element. The five characters
// can only stand inside JSON strings, where their \u escapes mean the same.
func scriptJSON(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode the popups of the script: %w", err)
	}
	return []byte(scriptJSONEscapes.Replace(string(b))), nil
}

// renderScript puts data into the script.
func renderScript(data scriptData) ([]byte, error) {
	b, err := scriptJSON(data)
	if err != nil {
		return nil, err
	}
	return []byte(strings.Replace(scriptSource, "__DATA__", string(b), 1)), nil
}

// scriptSource is the embeddable script. It runs on the customer's pages, so it touches
// nothing global but its own localStorage keys (bp_*), renders with textContent only (no
// HTML from data), and fails closed: without storage for its frequency caps it shows nothing.
// It posts its events next to where it was loaded from (.../popups.js -> .../events).
const scriptSource = `(function () {
  "use strict";
  var D = __DATA__;
  var me = document.currentScript;
  if (!D.popups.length || !me || !me.src) return;
  var EVENTS = me.src.replace(/popups\.js([?#].*)?$/, "events");
  function storage(name) {
    try { var s = window[name], k = "bp_probe"; s.setItem(k, "1"); s.removeItem(k); return s; } catch (e) { return null; }
  }
  var ls = storage("localStorage"), ss = storage("sessionStorage");
  if (!ls) return;
  function get(k) { try { return JSON.parse(ls.getItem(k)); } catch (e) { return null; } }
  function put(k, v) { try { ls.setItem(k, JSON.stringify(v)); } catch (e) {} }
  function rnd() {
    var a = new Uint8Array(16), s = "", i;
    if (window.crypto && window.crypto.getRandomValues) window.crypto.getRandomValues(a);
    else for (i = 0; i < a.length; i++) a[i] = Math.floor(Math.random() * 256);
    for (i = 0; i < a.length; i++) s += (a[i] < 16 ? "0" : "") + a[i].toString(16);
    return s;
  }
  var vid = get("bp_vid");
  if (typeof vid !== "string" || !/^[0-9a-f]{32}$/.test(vid)) { vid = rnd(); put("bp_vid", vid); }
  // New: this browser session is the visitor's first on the site.
  var isNew = get("bp_first") === null;
  if (isNew) { put("bp_first", Date.now()); try { ss && ss.setItem("bp_new", "1"); } catch (e) {} }
  else { try { isNew = !!ss && ss.getItem("bp_new") === "1"; } catch (e) {} }

  function device() {
    var u = navigator.userAgent || "";
    if (/iPad|Tablet|PlayBook|Silk/i.test(u) || (/Android/i.test(u) && !/Mobile/i.test(u)) ||
        (/Macintosh/.test(u) && navigator.maxTouchPoints > 1)) return "tablet";
    if (/Mobi|iPhone|iPod|Android/i.test(u)) return "mobile";
    return "desktop";
  }
  function matches(r, u) {
    switch (r.match) {
      case "equals": return u === r.value;
      case "prefix": return u.indexOf(r.value) === 0;
      case "contains": return u.indexOf(r.value) >= 0;
      case "glob": try { return new RegExp(r.re, "u").test(u); } catch (e) { return false; }
    }
    return false;
  }
  function onPage(t) {
    var u = location.href.split("#")[0];
    function any(rs) { return rs.some(function (r) { return matches(r, u); }); }
    return (!t.url_rules.length || any(t.url_rules)) && !any(t.exclude_url_rules);
  }
  function inSchedule(s) {
    if (!s) return true;
    var now = Date.now(), p = {};
    if (s.starts_at && now < Date.parse(s.starts_at)) return false;
    if (s.ends_at && now >= Date.parse(s.ends_at)) return false;
    if (!s.days_of_week.length && !s.hours) return true;
    try {
      new Intl.DateTimeFormat("en-US", { timeZone: s.timezone || D.tz, weekday: "short", hour: "2-digit", minute: "2-digit", hourCycle: "h23" })
        .formatToParts(new Date(now)).forEach(function (x) { p[x.type] = x.value; });
    } catch (e) { return false; }
    if (s.days_of_week.length && s.days_of_week.indexOf(String(p.weekday).toLowerCase()) < 0) return false;
    if (!s.hours) return true;
    var t = (p.hour === "24" ? "00" : p.hour) + ":" + p.minute, a = s.hours.from, b = s.hours.to;
    return a < b ? t >= a && t < b : t >= a || t < b;
  }
  function fkey(p) { return "bp_f_" + p.id; }
  function capped(p) {
    var f = get(fkey(p)) || {}, q = p.frequency;
    return !!((q.stop_after_conversion && f.c) || (f.n || 0) >= q.max_impressions_per_visitor ||
      (f.t && Date.now() - f.t < q.min_hours_between * 36e5));
  }
  function hash(s) {
    var h = 2166136261;
    for (var i = 0; i < s.length; i++) { h ^= s.charCodeAt(i); h = Math.imul(h, 16777619) >>> 0; }
    return h;
  }
  // A visitor keeps its variant: the one it saw before, else one drawn from its id by share.
  function variant(p) {
    var vs = p.variants, k = "bp_v_" + p.id, saved = get(k), i, acc = 0, r;
    for (i = 0; i < vs.length; i++) if (vs[i].key && vs[i].key === saved) return vs[i];
    r = hash(vid + ":" + p.id) % 100;
    for (i = 0; i < vs.length - 1; i++) { acc += vs[i].share; if (r < acc) break; }
    if (vs[i].key) put(k, vs[i].key);
    return vs[i];
  }
  function send(p, v, type, fields) {
    var ev = { popup_id: p.id, type: type, visitor_id: vid };
    if (v.key) ev.variant = v.key;
    if (fields) ev.fields = fields;
    try {
      fetch(EVENTS, { method: "POST", mode: "cors", credentials: "omit", keepalive: true,
        headers: { "Content-Type": "application/json" }, body: JSON.stringify(ev) })["catch"](function () {});
    } catch (e) {}
  }
  function el(tag, css, txt) {
    var e = document.createElement(tag);
    for (var k in css) e.style[k] = css[k];
    if (txt != null) e.textContent = txt;
    return e;
  }
  var INPUT = { email: "email", phone: "tel", number: "number", checkbox: "checkbox" };
  function render(p, v) {
    var c = v.content;
    var ov = el("div", { position: "fixed", top: "0", left: "0", right: "0", bottom: "0", background: "rgba(0,0,0,.45)",
      zIndex: "2147483647", display: "flex", alignItems: "center", justifyContent: "center" });
    var box = el("div", { background: "#fff", color: "#111", width: "90%", maxWidth: "420px", padding: "24px", borderRadius: "8px",
      fontFamily: "system-ui, sans-serif", position: "relative", boxSizing: "border-box", maxHeight: "90vh", overflow: "auto" });
    box.setAttribute("role", "dialog");
    box.setAttribute("aria-modal", "true");
    function close(type) {
      if (!ov.parentNode) return;
      ov.parentNode.removeChild(ov);
      if (type) send(p, v, type);
    }
    var x = el("button", { position: "absolute", top: "8px", right: "8px", border: "0", background: "none", fontSize: "22px", cursor: "pointer" }, "\u00d7");
    x.type = "button";
    x.setAttribute("aria-label", "Close");
    x.onclick = function () { close("close"); };
    box.appendChild(x);
    if (c.image_url) {
      var img = el("img", { display: "block", maxWidth: "100%", margin: "0 0 12px" });
      img.src = c.image_url;
      img.alt = "";
      box.appendChild(img);
    }
    box.appendChild(el("h2", { margin: "0 0 8px", fontSize: "20px" }, c.title));
    if (c.body) box.appendChild(el("p", { margin: "0 0 12px", whiteSpace: "pre-line" }, c.body));
    var form = el("form", { margin: "0" });
    c.fields.forEach(function (f) {
      var label = el("label", { display: "block", margin: "0 0 10px" }), input = document.createElement("input");
      input.name = f.name;
      input.type = INPUT[f.type] || "text";
      input.required = !!f.required;
      if (f.type === "checkbox") { label.appendChild(input); label.appendChild(document.createTextNode(" " + f.label)); }
      else {
        label.appendChild(document.createTextNode(f.label));
        input.style.display = "block"; input.style.width = "100%"; input.style.boxSizing = "border-box";
        label.appendChild(input);
      }
      form.appendChild(label);
    });
    var ok = el("button", { cursor: "pointer", padding: "8px 16px" }, c.button_text);
    ok.type = "submit";
    form.appendChild(ok);
    if (c.close_text) {
      var no = el("button", { cursor: "pointer", padding: "8px 16px", marginLeft: "8px", background: "none", border: "0" }, c.close_text);
      no.type = "button";
      no.onclick = function () { close("close"); };
      form.appendChild(no);
    }
    form.onsubmit = function (e) {
      e.preventDefault();
      var vals = {}, n = 0;
      c.fields.forEach(function (f) {
        var i = form.elements.namedItem(f.name), val = f.type === "checkbox" ? String(i.checked) : String(i.value).trim();
        if (val !== "") { vals[f.name] = val; n++; }
      });
      var rec = get(fkey(p)) || {};
      rec.c = 1;
      put(fkey(p), rec);
      send(p, v, "conversion", n ? vals : null);
      close(null);
    };
    box.appendChild(form);
    ov.appendChild(box);
    ov.onclick = function (e) { if (e.target === ov) close("close"); };
    document.body.appendChild(ov);
  }

  // At most one popup per page view: the first whose conditions are all met.
  var shown = false, exiting = false, armed = [], dev = device();
  function eligible(p) {
    var t = p.targeting;
    return onPage(t) && (!t.devices.length || t.devices.indexOf(dev) >= 0) &&
      (t.visitors === "all" || (t.visitors === "new") === isNew) && inSchedule(p.schedule) && !capped(p);
  }
  function scrolled() {
    var d = document.documentElement, h = d.scrollHeight - d.clientHeight;
    return h <= 0 ? 100 : (window.pageYOffset || d.scrollTop) / h * 100;
  }
  function ready(a) {
    var t = a.p.targeting;
    return a.timed && (!t.scroll_percent || scrolled() >= t.scroll_percent) && (!t.exit_intent || exiting);
  }
  function attempt() {
    if (shown) return;
    for (var i = 0; i < armed.length; i++) {
      var p = armed[i].p;
      if (!ready(armed[i]) || capped(p)) continue;
      shown = true;
      var v = variant(p), f = get(fkey(p)) || {};
      f.n = (f.n || 0) + 1;
      f.t = Date.now();
      put(fkey(p), f);
      render(p, v);
      send(p, v, "impression");
      return;
    }
  }
  function start() {
    D.popups.forEach(function (p) {
      if (!eligible(p)) return;
      var a = { p: p, timed: !p.targeting.delay_seconds };
      if (!a.timed) setTimeout(function () { a.timed = true; attempt(); }, p.targeting.delay_seconds * 1000);
      armed.push(a);
    });
    if (!armed.length) return;
    window.addEventListener("scroll", attempt, { passive: true });
    document.addEventListener("mouseout", function (e) {
      if (!e.relatedTarget && e.clientY <= 0) { exiting = true; attempt(); exiting = false; }
    });
    attempt();
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
`
