/**
 * The deploy seq an actor ran, on a real actor database: an executor
 * behind it within its line refuses it; a later seq, or another line, is
 * recorded (and must land before the event's answer).
 */

import assert from "node:assert/strict";
import { ActorDatabase } from "../../src/sqlite/actor_database.ts";
import {
  actorDeploySeq,
  BehindActor,
  DEPLOY_LINE_KEY,
  DEPLOY_SEQ_KEY,
  enterDeploySeq,
} from "../../src/executor/deploy_seq.ts";

const LINE = "0123456789abcdef";
const OTHER = "fedcba9876543210";

async function withDatabase(run: (db: ActorDatabase) => void): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "wk-deploy-seq-" });
  const db = new ActorDatabase(`${dir}/actor.db`);
  try {
    run(db);
  } finally {
    db.close();
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("deploy seq: recorded when later, refused when behind within the line, nothing on a node without an app", async () => {
  await withDatabase((db) => {
    assert.equal(enterDeploySeq(db, 0, ""), false);
    assert.equal(actorDeploySeq(db), 0);
    assert.equal(enterDeploySeq(db, 2, LINE), true);
    assert.equal(enterDeploySeq(db, 2, LINE), false);
    assert.deepEqual([db.getMeta(DEPLOY_SEQ_KEY), db.getMeta(DEPLOY_LINE_KEY)], ["2", LINE]);
    assert.throws(() => enterDeploySeq(db, 1, LINE), (error: Error) => {
      assert.ok(error instanceof BehindActor);
      assert.equal(error.status, 503);
      assert.equal(error.actorSeq, 2);
      return true;
    });
    assert.equal(actorDeploySeq(db), 2);
    // The simulator's planted bug serves it anyway, and leaves the record.
    assert.equal(enterDeploySeq(db, 1, LINE, true), false);
    assert.equal(actorDeploySeq(db), 2);
    assert.equal(enterDeploySeq(db, 3, LINE), true);
    assert.equal(actorDeploySeq(db), 3);
  });
});

Deno.test("deploy seq: another line is recorded whatever its seq, and the seq counts in it from then on", async () => {
  await withDatabase((db) => {
    assert.equal(enterDeploySeq(db, 7, LINE), true);
    assert.equal(enterDeploySeq(db, 1, OTHER), true);
    assert.deepEqual([db.getMeta(DEPLOY_SEQ_KEY), db.getMeta(DEPLOY_LINE_KEY)], ["1", OTHER]);
    assert.equal(enterDeploySeq(db, 1, OTHER), false);
    // Lines are not ordered: a node still on the first line would take it
    // back too, which is why a freed app's nodes are stopped first (the spec).
    assert.equal(enterDeploySeq(db, 1, LINE), true);
    assert.deepEqual([db.getMeta(DEPLOY_SEQ_KEY), db.getMeta(DEPLOY_LINE_KEY)], ["1", LINE]);
  });
});

Deno.test("deploy seq: a record torn between its two writes (the seq written, the line not) is taken again", async () => {
  await withDatabase((db) => {
    assert.equal(enterDeploySeq(db, 7, LINE), true);
    // What a crash between the two writes of a new line's record leaves.
    db.setMeta(DEPLOY_SEQ_KEY, "1");
    assert.equal(enterDeploySeq(db, 1, OTHER), true);
    assert.deepEqual([db.getMeta(DEPLOY_SEQ_KEY), db.getMeta(DEPLOY_LINE_KEY)], ["1", OTHER]);
  });
});

Deno.test("deploy seq: a seq recorded before lines counts in the line of the versions written before lines", async () => {
  await withDatabase((db) => {
    db.setMeta(DEPLOY_SEQ_KEY, "4");
    assert.throws(() => enterDeploySeq(db, 3, ""), BehindActor);
    assert.equal(enterDeploySeq(db, 5, ""), true);
    assert.equal(db.getMeta(DEPLOY_LINE_KEY), undefined);
  });
});
