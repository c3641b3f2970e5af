// The run's spans as a waterfall: one row a span, indented under its parent, led by the agent,
// model or tool it is about, with its status, its kind, its bar in time, and the tokens and cost
// of its subtree (a step taken from the record says "replayed" instead of a duration). Subtrees fold; a filter
// keeps the rows that match and the rows above them. Thousands of rows stay fluid: which rows
// are shown is worked out in one pass over the spans, and a long list puts in the page only the
// rows in view (plus a margin), as trace viewers do; a row is built once and reused.

import { el } from "./dom.js";
import { cost as money, took } from "./format.js";
import { kindOf, replayed, subjectOf } from "./span_words.js";

// Up to this many shown rows, all are in the page; beyond, only those in view.
const ALL_AT_ONCE = 300;
const MARGIN = 40; // rows drawn above and below the view

function statusOf(span) {
  if (span.end_ns === null) return ["open", "◌", "running"];
  if (span.status === "ERROR") return ["error", "✗", `error: ${span.status_message || ""}`];
  if (span.status === "OK") return ["ok", "✓", "ok"];
  return ["unset", "·", "outcome not recorded"];
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
    this.entries = []; // every span in tree order: { span, depth, parent, row, text }
    this.byId = new Map();
    this.shown = []; // the entries shown now
    this.collapsed = new Set();
    this.query = "";
    this.selected = null;
    this.rowHeight = 0;
    container.addEventListener("scroll", () => {
      if (this.shown.length > ALL_AT_ONCE && !this.pending) {
        this.pending = requestAnimationFrame(() => { this.pending = null; this.render(); });
      }
    });
  }

  draw(trace) {
    const now = Date.now() * 1e6;
    this.entries = [];
    this.byId = new Map();
    const walk = (nodes, depth, parent) => {
      for (const span of nodes) {
        const entry = { span, depth, parent, row: null, text: null };
        this.entries.push(entry);
        this.byId.set(span.span_id, entry);
        walk(span.children, depth + 1, span.span_id);
      }
    };
    for (const root of trace.spans) usage(root);
    walk(trace.spans, 0, null);
    const starts = this.entries.map((e) => e.span.start_ns);
    this.start = Math.min(...starts);
    this.total = Math.max(Math.max(...this.entries.map((e) => e.span.end_ns || now)) - this.start, 1);
    this.now = now;
    return this.apply();
  }

  row(entry) {
    if (entry.row) return entry.row;
    const { span, depth } = entry;
    const left = ((span.start_ns - this.start) / this.total) * 100;
    const width = Math.max((((span.end_ns || this.now) - span.start_ns) / this.total) * 100, 0.4);
    const [state, icon, said] = statusOf(span);
    const [kindName, kindMark] = kindOf(span);
    const fromRecord = replayed(span);
    const toggle = span.children.length
      ? el("button", {
        type: "button", class: "fold", "aria-label": "collapse or expand",
        onclick: (event) => { event.stopPropagation(); this.fold(span.span_id); },
      }, this.collapsed.has(span.span_id) ? "▸" : "▾")
      : el("span", { class: "fold" });
    const { input, output, cost, unpriced } = span.usage;
    entry.toggle = toggle;
    entry.row = el(
      "div",
      {
        class: `span-row ${state}${fromRecord ? " replayed" : ""}`, role: "listitem",
        "data-span": span.span_id, tabindex: 0, title: span.name,
        onclick: () => this.onSelect(span.span_id),
      },
      el("span", { class: "span-name", style: `padding-left:${depth * 14}px` },
        toggle,
        el("span", { class: `status-icon ${state}`, title: said }, icon),
        el("span", { class: "kind-icon", title: kindName }, kindMark),
        el("span", { class: "subject" }, subjectOf(span)),
        fromRecord ? el("span", { class: "replay-mark", title: "taken from the record, not done again" }, " ↻") : null),
      el("span", { class: "span-bar-track" },
        el("span", { class: "span-bar", style: `left:${left}%;width:${width}%` })),
      el("span", { class: "span-usage", title: "tokens in/out and cost of this span and those under it" },
        input + output ? `${input}/${output} · ${money(cost, unpriced)}` : ""),
      el("span", { class: "span-time" }, fromRecord ? "replayed" : took(span.duration_ms)),
    );
    return entry.row;
  }

  // Returns how many rows are shown.
  fold(spanId) {
    if (this.collapsed.has(spanId)) this.collapsed.delete(spanId);
    else this.collapsed.add(spanId);
    const entry = this.byId.get(spanId);
    if (entry && entry.toggle) entry.toggle.textContent = this.collapsed.has(spanId) ? "▸" : "▾";
    return this.apply();
  }

  // Returns how many rows are shown.
  filter(query) {
    this.query = query.trim().toLowerCase();
    return this.apply();
  }

  // One pass in tree order (a parent before its children): a row is shown when no row above it
  // is folded and, with a filter, when it or a row below it matches.
  apply() {
    const matched = new Set();
    if (this.query) {
      for (const entry of this.entries) {
        const { name, span_id: id, attributes } = entry.span;
        entry.text ??= `${name} ${id} ${JSON.stringify(attributes)}`.toLowerCase();
        if (!entry.text.includes(this.query)) continue;
        for (let at = entry.span.span_id; at && !matched.has(at); at = this.byId.get(at)?.parent) {
          matched.add(at);
        }
      }
    }
    const hiddenBelow = new Set(); // spans whose children are hidden (folded, or hidden)
    this.shown = [];
    for (const entry of this.entries) {
      const id = entry.span.span_id;
      const hidden = (entry.parent !== null && hiddenBelow.has(entry.parent))
        || (this.query !== "" && !matched.has(id));
      if (hidden || this.collapsed.has(id)) hiddenBelow.add(id);
      if (!hidden) this.shown.push(entry);
    }
    this.render();
    return this.shown.length;
  }

  // The shown rows in the page: all of them, or those in view when there are many.
  render() {
    if (this.shown.length <= ALL_AT_ONCE) {
      this.container.replaceChildren(...this.shown.map((e) => this.row(e)));
    } else {
      if (!this.rowHeight) {
        this.container.replaceChildren(this.row(this.shown[0]));
        this.rowHeight = this.shown[0].row.offsetHeight || 24;
      }
      const view = Math.ceil(this.container.clientHeight / this.rowHeight);
      const first = Math.max(0, Math.floor(this.container.scrollTop / this.rowHeight) - MARGIN);
      const last = Math.min(this.shown.length, first + view + 2 * MARGIN);
      const spacer = (rows) => el("div", { class: "spacer", style: `height:${rows * this.rowHeight}px` });
      this.container.replaceChildren(
        spacer(first),
        ...this.shown.slice(first, last).map((e) => this.row(e)),
        spacer(this.shown.length - last),
      );
    }
    for (const entry of this.shown) {
      if (entry.row) entry.row.classList.toggle("selected", entry.span.span_id === this.selected);
    }
  }

  select(spanId) {
    this.selected = spanId;
    let unfolded = false;
    for (let up = this.byId.get(spanId)?.parent; up; up = this.byId.get(up)?.parent) {
      if (!this.collapsed.has(up)) continue;
      this.collapsed.delete(up); // into view
      const above = this.byId.get(up);
      if (above.toggle) above.toggle.textContent = "▾";
      unfolded = true;
    }
    if (unfolded) this.apply();
    const index = this.shown.findIndex((e) => e.span.span_id === spanId);
    if (index < 0) return;
    if (this.shown.length > ALL_AT_ONCE) {
      const top = index * this.rowHeight;
      const bottom = this.container.scrollTop + this.container.clientHeight;
      if (top < this.container.scrollTop || top + this.rowHeight > bottom) {
        this.container.scrollTop = Math.max(0, top - this.container.clientHeight / 2);
      }
    }
    this.render();
    this.shown[index].row?.scrollIntoView({ block: "nearest" });
  }
}
