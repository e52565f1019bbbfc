/* Customer SDK for web pages (docs/sdk.md). No dependencies.
   MBSDK.init({projectKey, base}) registers this browser once (the installation token is
   kept in IndexedDB for the service worker); MBSDK.identify(userId, userHash, epoch);
   MBSDK.subscribe({serviceWorker: "/sw.js"}) asks permission and registers web push;
   MBSDK.track(name, properties).
   A browser keeps a push subscription made with the VAPID key of the time, and
   pushManager.subscribe with another key fails while it exists: after the bot's keys are
   rotated, subscribe() and, when permission is already granted, init() itself compare the
   subscription's applicationServerKey with the bot's current key and, when they differ,
   unsubscribe, subscribe with the current key and register the new subscription.
   MBSDK.pushRefreshed() is init's check: "unchanged", "resubscribed" or "skipped: why". */
(function () {
  "use strict";
  var DB = "mbsdk", STORE = "kv", cfg = null;
  function idb(mode, fn) {
    return new Promise(function (resolve, reject) {
      var open = indexedDB.open(DB, 1);
      open.onupgradeneeded = function () { open.result.createObjectStore(STORE); };
      open.onerror = function () { reject(open.error); };
      open.onsuccess = function () {
        var tx = open.result.transaction(STORE, mode), req = fn(tx.objectStore(STORE));
        tx.oncomplete = function () { resolve(req && req.result); };
        tx.onerror = function () { reject(tx.error); };
      };
    });
  }
  function get(k) { return idb("readonly", function (s) { return s.get(k); }); }
  function put(k, v) { return idb("readwrite", function (s) { return s.put(v, k); }); }
  function call(method, path, body, token) {
    var h = { "Content-Type": "application/json" };
    if (token) h.Authorization = "Bearer " + token;
    return fetch(cfg.base + path, { method: method, headers: h, body: body ? JSON.stringify(body) : undefined })
      .then(function (r) {
        if (r.status === 204) return null;
        return r.json().then(function (j) { if (!r.ok) { var e = new Error(j.detail || r.status); e.problem = j; throw e; } return j; });
      });
  }
  function b64(buf) {
    var s = String.fromCharCode.apply(null, new Uint8Array(buf));
    return btoa(s).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  }
  function unb64(s) {
    s = s.replace(/-/g, "+").replace(/_/g, "/"); while (s.length % 4) s += "=";
    var raw = atob(s), out = new Uint8Array(raw.length);
    for (var i = 0; i < raw.length; i++) out[i] = raw.charCodeAt(i);
    return out;
  }
  function sameKey(sub, key) {
    var k = sub && sub.options && sub.options.applicationServerKey;
    if (!k) return false; // unknown: made by other code, or a browser that does not say
    var a = new Uint8Array(k);
    if (a.length !== key.length) return false;
    for (var i = 0; i < a.length; i++) if (a[i] !== key[i]) return false;
    return true;
  }
  // current returns the registration's subscription made with key, replacing one made with
  // another key: {subscription, changed}.
  function current(reg, key) {
    return reg.pushManager.getSubscription().then(function (sub) {
      if (sub && sameKey(sub, key)) return { subscription: sub, changed: false };
      return (sub ? sub.unsubscribe() : Promise.resolve(true)).then(function () {
        return reg.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: key });
      }).then(function (fresh) { return { subscription: fresh, changed: true }; });
    });
  }
  function register(sub, token) {
    return call("POST", "/sdk/v1/push-tokens", { kind: "web_push", consent: "granted",
      subscription: { endpoint: sub.endpoint, keys: { p256dh: b64(sub.getKey("p256dh")), auth: b64(sub.getKey("auth")) } } }, token);
  }
  // refresh is init's check when permission is granted already: a subscription made with a
  // key the bot no longer has is replaced and registered.
  function refresh(inst, worker) {
    if (typeof Notification === "undefined" || !("serviceWorker" in navigator)) return Promise.resolve("skipped: no web push in this browser");
    if (Notification.permission !== "granted") return Promise.resolve("skipped: permission " + Notification.permission);
    var reg = worker ? navigator.serviceWorker.register(worker) : navigator.serviceWorker.getRegistration();
    return reg.then(function (r) {
      if (!r) return "skipped: no service worker";
      return call("GET", "/sdk/v1/web-push/config", null, inst.token).then(function (c) {
        if (!c.enabled) return "skipped: web push not enabled";
        return current(r, unb64(c.vapid_public_key)).then(function (got) {
          if (!got.changed) return "unchanged";
          return register(got.subscription, inst.token).then(function () { return "resubscribed"; });
        });
      });
    });
  }
  var ready = null, refreshed = null;
  var MBSDK = {
    init: function (o) {
      cfg = { projectKey: o.projectKey, base: (o.base || "").replace(/\/$/, "") };
      ready = get("installation").then(function (inst) {
        if (inst && inst.projectKey === cfg.projectKey) return inst;
        return call("POST", "/sdk/v1/installations", {
          project_key: cfg.projectKey, platform: "web", app_id: location.origin, sdk_version: "1.0.0",
          locale: navigator.language || "", timezone: (Intl.DateTimeFormat().resolvedOptions().timeZone || "")
        }).then(function (r) {
          var rec = { projectKey: cfg.projectKey, base: cfg.base, id: r.id, token: r.token };
          return put("installation", rec).then(function () { return rec; });
        });
      });
      refreshed = ready.then(function (inst) { return refresh(inst, o.serviceWorker); })
        .catch(function (e) { return "failed: " + (e && e.message); });
      return ready;
    },
    installation: function () { return ready; },
    pushRefreshed: function () { return refreshed; },
    identify: function (userId, userHash, epoch) {
      return ready.then(function (i) { return call("POST", "/sdk/v1/identify", { user_id: userId, user_hash: userHash, identity_epoch: epoch }, i.token); });
    },
    track: function (name, properties) {
      var id = (crypto.randomUUID ? crypto.randomUUID() : String(Date.now()) + Math.random()).replace(/[^A-Za-z0-9-]/g, "");
      return ready.then(function (i) { return call("POST", "/sdk/v1/events", { events: [{ event_id: id, name: name, properties: properties || {} }] }, i.token); });
    },
    subscribe: function (o) {
      var inst;
      return ready.then(function (i) { inst = i; return call("GET", "/sdk/v1/web-push/config", null, i.token); })
        .then(function (c) {
          if (!c.enabled) throw new Error("web push is not enabled for this bot");
          return Notification.requestPermission().then(function (perm) {
            if (perm !== "granted") throw new Error("notification permission " + perm);
            return navigator.serviceWorker.register((o && o.serviceWorker) || "/sw.js");
          }).then(function () { return navigator.serviceWorker.ready; })
            .then(function (reg) { return current(reg, unb64(c.vapid_public_key)); });
        })
        .then(function (got) { return register(got.subscription, inst.token); });
    }
  };
  self.MBSDK = MBSDK;
})();
