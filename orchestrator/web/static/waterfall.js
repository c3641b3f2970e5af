// The run's spans as a waterfall: one row a span, indented under its parent, with its status,
// its kind, its bar in time, and the tokens and cost of its subtree. Subtrees collapse; a filter
// keeps the rows that match and the rows above them. Thousands of rows stay fluid: rows are
// built once per trace and hidden or shown, never rebuilt for a filter or a fold.

import { el } from "./dom.js";
import { took } from "./span_view.js";

const KINDS = {
  invoke_workflow: ["run", "R"],
  invoke_agent: ["agent", "A"],
  chat: ["model call", "M"],
  execute_tool: ["tool call", "T"],
};

function statusOf(span) {
  if (span.end_ns === null) return ["open", "◌", "running"];
  if (span.status === "ERROR") return ["error", "✗", `error: ${span.status_message || ""}`];
  if (span.status === "OK") return ["ok", "✓", "ok"];
  return ["unset", "·", "outcome not recorded"];
}

// "–": no model call under it has a known price; "≥": some have none.
function money(usd, unpriced) {
  if (unpriced && !usd) return "–";
  const shown = `$${usd > 0 && usd < 0.01 ? usd.toFixed(4) : usd.toFixed(2)}`;
  return unpriced ? `≥ ${shown}` : shown;
}

// Tokens and cost of a span's subtree, from its model calls (each counted once).
function usage(span) {
  const chat = span.name.startsWith("chat ");
  const own = chat ? span.attributes : {};
  const total = {
    input: Number(own["gen_ai.usage.input_tokens"] || 0),
    output: Number(own["gen_ai.usage.output_tokens"] || 0),
    cost: Number(own["baton.usage.cost_usd"] || 0),
    unpriced: chat && span.end_ns !== null && own["baton.usage.cost_usd"] === undefined ? 1 : 0,
  };
  for (const child of span.children) {
    const sub = usage(child);
    total.input += sub.input;
    total.output += sub.output;
    total.cost += sub.cost;
    total.unpriced += sub.unpriced;
  }
  span.usage = total;
  return total;
}

export class Waterfall {
  constructor(container, onSelect) {
    this.container = container;
    this.onSelect = onSelect;
    this.rows = new Map(); // span id -> { row, span, depth, parent, toggle }
    this.collapsed = new Set();
    this.query = "";
  }

  draw(trace) {
    const flat = [];
    const walk = (nodes, depth, parent) => {
      for (const node of nodes) {
        flat.push([node, depth, parent]);
        walk(node.children, depth + 1, node.span_id);
      }
    };
    for (const root of trace.spans) usage(root);
    walk(trace.spans, 0, null);
    const now = Date.now() * 1e6;
    const start = Math.min(...flat.map(([s]) => s.start_ns));
    const end = Math.max(...flat.map(([s]) => s.end_ns || now));
    const total = Math.max(end - start, 1);
    this.rows = new Map();
    const built = flat.map(([span, depth, parent]) => {
      const left = ((span.start_ns - start) / total) * 100;
      const width = Math.max((((span.end_ns || now) - span.start_ns) / total) * 100, 0.4);
      const [state, icon, said] = statusOf(span);
      const [kindName, kindMark] = KINDS[span.attributes["gen_ai.operation.name"]] || ["span", "·"];
      const toggle = span.children.length
        ? el("button", {
          type: "button", class: "fold", "aria-label": "collapse or expand",
          onclick: (event) => { event.stopPropagation(); this.fold(span.span_id); },
        }, this.collapsed.has(span.span_id) ? "▸" : "▾")
        : el("span", { class: "fold" });
      const { input, output, cost, unpriced } = span.usage;
      const row = el(
        "div",
        {
          class: `span-row ${state}`, role: "listitem", "data-span": span.span_id, tabindex: 0,
          onclick: () => this.onSelect(span.span_id),
        },
        el("span", { class: "span-name", style: `padding-left:${depth * 14}px` },
          toggle,
          el("span", { class: `status-icon ${state}`, title: said }, icon),
          el("span", { class: "kind-icon", title: kindName }, kindMark),
          span.name),
        el("span", { class: "span-bar-track" },
          el("span", { class: "span-bar", style: `left:${left}%;width:${width}%` })),
        el("span", { class: "span-usage", title: "tokens in/out and cost of this span and those under it" },
          input + output ? `${input}/${output} · ${money(cost, unpriced)}` : ""),
        el("span", { class: "span-time" }, took(span.duration_ms)),
      );
      this.rows.set(span.span_id, { row, span, parent, toggle, text: `${span.name} ${JSON.stringify(span.attributes)}`.toLowerCase() });
      return row;
    });
    this.container.replaceChildren(...built);
    this.apply();
  }

  fold(spanId) {
    if (this.collapsed.has(spanId)) this.collapsed.delete(spanId);
    else this.collapsed.add(spanId);
    const entry = this.rows.get(spanId);
    if (entry) entry.toggle.textContent = this.collapsed.has(spanId) ? "▸" : "▾";
    this.apply();
  }

  // Returns how many rows are shown.
  filter(query) {
    this.query = query.trim().toLowerCase();
    return this.apply();
  }

  // Show a row when no ancestor is folded and, with a filter, when it or a row below matches.
  apply() {
    const matched = new Set();
    if (this.query) {
      for (const [id, entry] of this.rows) {
        if (!entry.text.includes(this.query)) continue;
        for (let at = id; at && !matched.has(at); at = this.rows.get(at)?.parent) matched.add(at);
      }
    }
    let shown = 0;
    for (const [id, entry] of this.rows) {
      let hidden = this.query !== "" && !matched.has(id);
      for (let up = entry.parent; up && !hidden; up = this.rows.get(up)?.parent) {
        hidden = this.collapsed.has(up);
      }
      entry.row.hidden = hidden;
      if (!hidden) shown += 1;
    }
    return shown;
  }

  select(spanId) {
    for (let up = this.rows.get(spanId)?.parent; up; up = this.rows.get(up)?.parent) {
      if (this.collapsed.has(up)) this.fold(up); // bring a selected span into view
    }
    for (const [id, entry] of this.rows) entry.row.classList.toggle("selected", id === spanId);
    const entry = this.rows.get(spanId);
    if (entry) entry.row.scrollIntoView({ block: "nearest" });
  }
}
