// One request per item at a time. A slow item must neither be asked for again
// while its answer is on the way (the 20 s poll used to pile requests up and
// throw the slow answer away), nor block the rest of the tab. A 202 ("still
// reducing") is reported as progress and asked again after `retryMs`, for as
// long as somebody still wants the item.

import { isPending } from "./api.js";

/** Rejection reason when nobody wanted a still-reducing item any more. */
export class Cancelled extends Error {
  constructor() {
    super("no longer wanted");
    this.name = "Cancelled";
  }
}

/**
 * get(key, request, {onProgress, keep}) -> Promise of the answer.
 * A key already in flight (or waiting to ask again) shares that promise: no new request.
 * keep() says whether this caller still wants the item; when no caller does at
 * retry time, the promise rejects with Cancelled instead of asking again.
 */
export function createLoader({ retryMs = 1000, wait = (ms) => new Promise((r) => setTimeout(r, ms)) } = {}) {
  const flights = new Map(); // key -> {promise, callers: Set, last: Pending|null}

  async function run(flight, request) {
    for (;;) {
      const answer = await request();
      if (!isPending(answer)) return answer;
      flight.last = answer;
      for (const caller of flight.callers) caller.onProgress?.(answer);
      await wait(retryMs);
      if (![...flight.callers].some((caller) => caller.keep())) throw new Cancelled();
    }
  }

  function get(key, request, { onProgress, keep = () => true } = {}) {
    let flight = flights.get(key);
    if (!flight) {
      flight = { callers: new Set(), last: null };
      flights.set(key, flight);
      flight.promise = run(flight, request).finally(() => flights.delete(key));
    }
    flight.callers.add({ onProgress, keep });
    if (flight.last && onProgress) onProgress(flight.last);
    return flight.promise;
  }

  return { get, inFlight: (key) => flights.has(key), size: () => flights.size };
}
