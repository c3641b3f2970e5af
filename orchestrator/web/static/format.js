// How the UI writes times, durations and money.

const two = (n) => String(n).padStart(2, "0");

// A span's moment, local time to the millisecond: 17:15:16.643.
export function clock(ns) {
  const at = new Date(ns / 1e6);
  const ms = String(at.getMilliseconds()).padStart(3, "0");
  return `${two(at.getHours())}:${two(at.getMinutes())}:${two(at.getSeconds())}.${ms}`;
}

// A run's moment, local date and time: 2026-11-27 17:15:16.
export function when(epoch) {
  const at = new Date(epoch * 1000);
  const date = `${at.getFullYear()}-${two(at.getMonth() + 1)}-${two(at.getDate())}`;
  return `${date} ${two(at.getHours())}:${two(at.getMinutes())}:${two(at.getSeconds())}`;
}

export function took(ms) {
  if (ms === null || ms === undefined) return "running";
  if (ms < 1) return `${(ms * 1000).toFixed(0)} µs`;
  return ms < 10000 ? `${ms.toFixed(1)} ms` : `${(ms / 1000).toFixed(2)} s`;
}

// Free (a built-in model) is $0.00; "–" where the cost is unknown (calls to a model litellm has
// no price for), "≥ $x" where part of it is.
export function cost(usd, unpriced = 0) {
  if (usd === null || usd === undefined || (unpriced && !usd)) return "–";
  const shown = `$${usd > 0 && usd < 0.01 ? usd.toFixed(4) : usd.toFixed(2)}`;
  return unpriced ? `≥ ${shown}` : shown;
}
