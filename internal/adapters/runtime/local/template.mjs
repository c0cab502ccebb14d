// agentplane's template hooks (local runtime, template_freeze.go), preloaded in every Node
// thread and process of a gateway that becomes a template: one CRIU image restored into many
// sandboxes. Before the dump the manager sends each Node process SIGWINCH: its main thread
// stops its worker threads, tells the manager it holds still, and waits in a read of a FIFO.
// A copy restored from the image goes on only when the manager writes to that FIFO, and each
// of its processes first reseeds OpenSSL from the kernel (agentplane-reseed.node), so that no
// copy draws the random stream of another.
import crypto from 'node:crypto';
import fs from 'node:fs';
import { isMainThread, BroadcastChannel } from 'node:worker_threads';

const dir = process.env.AGENTPLANE_TEMPLATE_DIR;
const addon = process.env.AGENTPLANE_TEMPLATE_RESEED;

if (dir && addon) {
  // Math.random from OpenSSL: V8's own generator, restored with the image, would give every
  // copy the same numbers. The main thread draws in batches, dropped at the freeze and the
  // thaw; a worker draws each number (a worker blocked when the template froze, in an
  // Atomics.wait of the engine's own, cannot be told to drop a batch).
  const batch = new Uint32Array(isMainThread ? 128 : 2);
  let next = batch.length;
  const drop = () => { next = batch.length; batch.fill(0); };
  Math.random = function random() {
    if (next >= batch.length) {
      crypto.getRandomValues(batch);
      next = 0;
    }
    const v = (batch[next] * 2 ** 21 + (batch[next + 1] >>> 11)) / 2 ** 53;
    next += 2;
    return v;
  };
  // UUIDs without Node's entropy cache (the bytes of 128 UUIDs drawn at once).
  const randomUUID = crypto.randomUUID;
  crypto.randomUUID = (options) => randomUUID({ ...options, disableEntropyCache: true });
  if (globalThis.crypto?.randomUUID) globalThis.crypto.randomUUID = () => crypto.randomUUID();

  // The manager's plans for this process (engine.InstanceReset): freeze.json before the
  // dump, thaw.json in each copy; null when there is none.
  const plan = (name) => {
    let p;
    try {
      p = JSON.parse(fs.readFileSync(`${dir}/${name}`, 'utf8'));
    } catch (e) {
      if (e.code === 'ENOENT') return null;
      throw e;
    }
    return p.pid === process.pid ? p : null;
  };
  // The template's gateway forgets its instance before the dump (statements on its state
  // database), while its threads are held: the engine's own connections are then idle and
  // the same SQLite in this process coordinates with them. In a copy this connection would
  // not: the engine's connections, restored from the image, know the template's database
  // file, not the copy's, so SQLite's locks would not order their writes against it.
  const forgetInstance = () => {
    const p = plan('freeze.json');
    if (!p?.db) return;
    const { DatabaseSync } = process.getBuiltinModule('node:sqlite');
    const db = new DatabaseSync(p.db, { timeout: 5000 });
    try {
      for (const q of p.sql) db.exec(q);
    } finally {
      db.close();
    }
  };
  // A copy's gateway process then restarts in-process on the agent's config (thaw.json's
  // signal), and makes its own identity.
  const restart = () => {
    const p = plan('thaw.json');
    if (p?.signal) setImmediate(() => process.kill(process.pid, p.signal));
  };

  const channel = new BroadcastChannel('agentplane-template');
  channel.unref();
  if (isMainThread) {
    // The worker threads of this process (of any depth) say hello as they start, bye as they end.
    let workers = 0;
    channel.onmessage = ({ data }) => {
      if (data === 'hello') workers++;
      else if (data === 'bye') workers--;
    };
    process.on('SIGWINCH', () => {
      const flag = new Int32Array(new SharedArrayBuffer(8)); // [thawed, workers frozen]
      channel.postMessage(flag.buffer);
      // A worker that does not answer within 2 s is blocked already (the template was idle
      // when it froze): in an Atomics.wait of the engine's own, for this thread, which goes
      // on only after the reseed below.
      const deadline = Date.now() + 2000;
      let frozen;
      while ((frozen = Atomics.load(flag, 1)) < workers && Date.now() < deadline) {
        Atomics.wait(flag, 1, frozen, deadline - Date.now());
      }
      try {
        forgetInstance();
      } catch (e) {
        process.stderr.write(`agentplane: the template could not forget its instance: ${e.message}\n`);
        process.exit(71);
      }
      drop();
      const ack = fs.openSync(`${dir}/frozen`, fs.constants.O_WRONLY | fs.constants.O_NONBLOCK);
      fs.writeSync(ack, 'y');
      fs.closeSync(ack);
      const thaw = fs.openSync(`${dir}/thaw`, fs.constants.O_RDWR);
      fs.readSync(thaw, Buffer.alloc(1), 0, 1, null); // here until a copy is thawed
      fs.closeSync(thaw);
      const m = { exports: {} };
      process.dlopen(m, addon);
      if (m.exports.reseed() !== true) {
        process.stderr.write('agentplane: OpenSSL could not be reseeded after a restore\n');
        process.exit(70);
      }
      drop();
      restart();
      Atomics.store(flag, 0, 1);
      Atomics.notify(flag, 0);
    });
  } else {
    channel.postMessage('hello');
    process.on('exit', () => channel.postMessage('bye'));
    channel.onmessage = ({ data }) => {
      if (!(data instanceof SharedArrayBuffer)) return;
      drop();
      const flag = new Int32Array(data);
      Atomics.add(flag, 1, 1);
      Atomics.notify(flag, 1);
      Atomics.wait(flag, 0, 0);
      drop();
    };
  }
}
