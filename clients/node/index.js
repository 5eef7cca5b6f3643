'use strict';
// pg-idempotency: Idempotency-Key middleware for Express and the key
// functions of the idempotency PostgreSQL extension on node-postgres.
// README.md beside this file explains it.

const client = require('./lib/client');
const { idempotency, Claim, sendProblem } = require('./lib/middleware');

module.exports = {
  idempotency,
  Claim,
  sendProblem,
  IdempotencyError: client.IdempotencyError,
  claim: client.claim,
  complete: client.complete,
  fail: client.fail,
  heartbeat: client.heartbeat,
  checkpoint: client.checkpoint,
  release: client.release,
};
