import { test } from "node:test";
import assert from "node:assert/strict";
import { scrollToShow, viewportHeight, visibleRange } from "../src/virtual.js";

test("top of a long list renders the first screen plus overscan", () => {
  const r = visibleRange({ scrollTop: 0, viewportHeight: 240, rowHeight: 24, rowCount: 20000, overscan: 5 });
  assert.deepEqual(r, { start: 0, end: 15, offsetTop: 0, totalHeight: 480000 });
});

test("middle of the list", () => {
  const r = visibleRange({ scrollTop: 24 * 1000 + 12, viewportHeight: 240, rowHeight: 24, rowCount: 20000, overscan: 5 });
  assert.equal(r.start, 995);
  assert.equal(r.end, 1016);
  assert.equal(r.offsetTop, 995 * 24);
});

test("scrolling past the end is clamped", () => {
  const r = visibleRange({ scrollTop: 1e9, viewportHeight: 240, rowHeight: 24, rowCount: 100, overscan: 2 });
  assert.equal(r.end, 100);
  assert.equal(r.start, 88);
});

test("a short list renders whole; an empty one renders nothing", () => {
  assert.deepEqual(visibleRange({ scrollTop: 0, viewportHeight: 480, rowHeight: 24, rowCount: 3 }).end, 3);
  assert.deepEqual(visibleRange({ scrollTop: 0, viewportHeight: 480, rowHeight: 24, rowCount: 0 }),
    { start: 0, end: 0, offsetTop: 0, totalHeight: 0 });
});

test("viewport fits small tables and caps large ones", () => {
  assert.equal(viewportHeight(3, 24, 480), 72);
  assert.equal(viewportHeight(0, 24, 480), 24);
  assert.equal(viewportHeight(20000, 24, 480), 480);
});

test("the keyboard's row is scrolled into view, moving as little as it can", () => {
  const at = (index, scrollTop) => scrollToShow({ index, scrollTop, viewportHeight: 100, rowHeight: 25 });
  assert.equal(at(0, 0), 0); // in view: no move
  assert.equal(at(4, 0), 25); // below: its bottom at the viewport's
  assert.equal(at(1, 50), 25); // above: its top at the viewport's
  assert.equal(at(3, 25), 25);
});
