#!/usr/bin/env node
// Starts the push service emulator of the npm package web-push-testing (1.2.2) on
// 127.0.0.1 only, on a free port, and prints "listening http://127.0.0.1:PORT" once it takes
// connections. The package's own `start` daemonizes and listens on every interface, so its
// server module is driven from here instead: the same routes (/subscribe,
// /notify/:clientHash, /get-notifications, /expire-subscription/:clientHash), bound to
// loopback. Subscriptions live in this process's memory and end with it.
//
// Usage: node tests/emulators/webpush/server.js <web-push-testing package directory>
'use strict';

const path = require('path');

const dir = process.argv[2] && path.resolve(process.argv[2]);
if (!dir) {
	console.error('usage: server.js <web-push-testing package directory>');
	process.exit(2);
}
const TestingServer = require(path.join(dir, 'src', 'server.js'));
const {PushApiModel} = require(path.join(dir, 'src', 'PushApiModel.js'));

const model = new PushApiModel();
const server = new TestingServer(model, 0);
const listener = server._app.listen(0, '127.0.0.1', () => {
	const {port} = listener.address();
	// Subscriptions' endpoints point here, at the address actually bound.
	model.notifyUrl = `http://127.0.0.1:${port}/notify/`;
	console.log(`listening http://127.0.0.1:${port}`);
});
listener.on('error', err => {
	console.error(err);
	process.exit(1);
});
server.setRequestHandlers();

// The test harness stops it by closing stdin or by a signal.
process.stdin.resume();
process.stdin.on('end', () => process.exit(0));
process.on('SIGTERM', () => process.exit(0));
