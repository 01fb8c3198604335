'use strict';
// An ioredis connection option object from a redis:// URL (host, port, db, user, password).
module.exports = function connectionFrom(url) {
  const u = new URL(url);
  const conn = { host: u.hostname || '127.0.0.1', port: Number(u.port || 6379), maxRetriesPerRequest: null };
  if (u.password) conn.password = decodeURIComponent(u.password);
  if (u.username) conn.username = decodeURIComponent(u.username);
  if (u.pathname.length > 1) conn.db = Number(u.pathname.slice(1));
  return conn;
};
