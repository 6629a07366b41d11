// A client in another language: Node.js with @grpc/grpc-js, loading the .proto files (not the
// Python stubs). Starts the server the way a user would, pushes a snapshot, reads it back, and
// checks an INVALID_ARGUMENT with its google.rpc details.
'use strict';

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const net = require('node:net');
const { spawn } = require('node:child_process');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');
const protobuf = require('protobufjs');

const ROOT = path.resolve(__dirname, '..', '..');
const PYTHON = process.env.STRATA_PYTHON || path.join(ROOT, '.venv', 'bin', 'python');

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
    srv.on('error', reject);
  });
}

const definition = protoLoader.loadSync(
  [path.join(ROOT, 'protos/strata/policy/v1/policy_service.proto')],
  { includeDirs: [path.join(ROOT, 'protos')], keepCase: false, longs: String, enums: String, defaults: true },
);
const pkg = grpc.loadPackageDefinition(definition).strata.policy.v1;

// google.rpc.Status and the two detail messages we check, from a minimal copy of their schema
// (field numbers as in googleapis); protobufjs decodes the grpc-status-details-bin trailer.
const rpcSchema = protobuf.loadSync(path.join(__dirname, 'google_rpc.proto'));

let server;
let client;

before(async () => {
  const port = await freePort();
  server = spawn(PYTHON, ['-m', 'strata_policy.cli', 'serve', '--address', `127.0.0.1:${port}`, '--log-level', 'warning'], {
    cwd: ROOT,
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  client = new pkg.PolicyService(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
  await new Promise((resolve, reject) => {
    client.waitForReady(Date.now() + 60000, (err) => (err ? reject(err) : resolve()));
  });
  // The port opens before the kernels are warm; until then calls are UNAVAILABLE (retry).
  const deadline = Date.now() + 120000;
  for (;;) {
    const code = await new Promise((resolve) => {
      client.GetCluster({ clusterId: 'warm-up-probe' }, (err) => resolve(err ? err.code : 0));
    });
    if (code !== grpc.status.UNAVAILABLE || Date.now() > deadline) break;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
});

after(() => {
  if (client) client.close();
  if (server) server.kill('SIGTERM');
});

function call(method, request) {
  return new Promise((resolve, reject) => {
    client[method](request, (err, response) => (err ? reject(err) : resolve(response)));
  });
}

const snapshot = {
  nodes: [
    { id: 'node-1', capacity: { cpu: '64000', gpu: '8000' }, gpuModel: 'A100' },
    { id: 'node-2', capacity: { cpu: '64000', gpu: '8000' }, gpuModel: 'A100' },
  ],
  scopes: [{ id: 'team-a', guarantee: { gpu: '8000' } }],
  workloads: [
    {
      workload: { id: 'job-1', scopeId: 'team-a', request: { gpu: '1000' }, replicas: 1 },
      placements: [{ nodeId: 'node-1', gpuDevices: [3] }],
    },
  ],
};

test('push a snapshot and read it back', async () => {
  const pushed = await call('pushSnapshot', { clusterId: 'node-js', snapshot });
  assert.equal(pushed.generation, '1');
  assert.equal(pushed.nodeCount, 2);
  const got = await call('getCluster', { clusterId: 'node-js', includeSnapshot: true });
  assert.equal(got.generation, '1');
  assert.deepEqual(got.snapshot.nodes.map((n) => n.id), ['node-1', 'node-2']);
  assert.deepEqual(got.snapshot.workloads[0].placements[0].gpuDevices, [3]);
  const teamA = got.scopes.find((s) => s.id === 'team-a');
  assert.equal(teamA.usage.gpu, '1000');
});

test('a bad snapshot is INVALID_ARGUMENT with field violations', async () => {
  const bad = { nodes: [{ id: 'node-1', capacity: { gpu: '1500' } }] };
  await assert.rejects(call('pushSnapshot', { clusterId: 'node-js-bad', snapshot: bad }), (err) => {
    assert.equal(err.code, grpc.status.INVALID_ARGUMENT);
    const raw = err.metadata.get('grpc-status-details-bin')[0];
    const message = rpcSchema.lookupType('google.rpc.Status').decode(raw);
    const details = message.details.map((any) => {
      const typeName = any.typeUrl.split('/').pop();
      return { typeName, value: rpcSchema.lookupType(typeName).decode(any.value) };
    });
    const info = details.find((d) => d.typeName === 'google.rpc.ErrorInfo').value;
    assert.equal(info.reason, 'INVALID_ARGUMENT');
    assert.equal(info.domain, 'strata.policy.v1');
    const badRequest = details.find((d) => d.typeName === 'google.rpc.BadRequest').value;
    assert.equal(badRequest.fieldViolations[0].field, 'snapshot.nodes[0].capacity["gpu"]');
    return true;
  });
});
