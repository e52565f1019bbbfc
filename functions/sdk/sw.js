/* Customer SDK service worker part (docs/sdk.md). The site's own service worker does
   importScripts("<api>/sdk/v1/sw.js"). A push message is JSON:
   {"title", "body", "icon", "url", "message_id", "subscription_id"}. It shows the
   notification and reports delivered, clicked and closed receipts with the installation
   token sdk.js stored in IndexedDB. */
(function () {
  "use strict";
  function installation() {
    return new Promise(function (resolve) {
      var open = indexedDB.open("mbsdk", 1);
      open.onupgradeneeded = function () { open.result.createObjectStore("kv"); };
      open.onerror = function () { resolve(null); };
      open.onsuccess = function () {
        var req = open.result.transaction("kv", "readonly").objectStore("kv").get("installation");
        req.onsuccess = function () { resolve(req.result || null); };
        req.onerror = function () { resolve(null); };
      };
    });
  }
  function receipt(data, kind) {
    if (!data || !data.message_id || !data.subscription_id) return Promise.resolve();
    return installation().then(function (i) {
      if (!i) return;
      return fetch(i.base + "/sdk/v1/receipts", { method: "POST",
        headers: { "Content-Type": "application/json", Authorization: "Bearer " + i.token },
        body: JSON.stringify({ subscription_id: data.subscription_id, kind: kind, message_id: data.message_id }) }).catch(function () {});
    });
  }
  self.addEventListener("push", function (e) {
    var d = {};
    try { d = e.data ? e.data.json() : {}; } catch (err) { d = { title: e.data ? e.data.text() : "" }; }
    e.waitUntil(Promise.all([
      self.registration.showNotification(d.title || "", { body: d.body || "", icon: d.icon, data: d }),
      receipt(d, "delivered")
    ]));
  });
  self.addEventListener("notificationclick", function (e) {
    var d = e.notification.data || {};
    e.notification.close();
    e.waitUntil(Promise.all([receipt(d, "clicked"), d.url ? self.clients.openWindow(d.url) : null]));
  });
  self.addEventListener("notificationclose", function (e) {
    e.waitUntil(receipt(e.notification.data || {}, "closed"));
  });
})();
