// How the UI writes times, durations and money.

export function clock(ns) {
  const at = new Date(ns / 1e6);
  return `${at.toLocaleString()}.${String(at.getMilliseconds()).padStart(3, "0")}`;
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
