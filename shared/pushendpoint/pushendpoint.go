// Package pushendpoint holds what the two families that handle a browser's web push
// endpoint URL must agree on: the customer SDK accepts and stores it (functions/customersdk,
// POST /sdk/v1/push-tokens) and browser push sends to it (functions/webpush). One bound, so
// that an endpoint the device surface accepted is never refused at send time, and one that
// send time would refuse is refused when the browser registers it.
package pushendpoint

// MaxLength bounds an endpoint URL, in bytes (it is printable ASCII). The push services'
// endpoints are a few hundred characters (FCM's about 200, Mozilla's autopush and Apple's
// under 400); 1024 leaves room without storing whatever a caller sends.
const MaxLength = 1024
