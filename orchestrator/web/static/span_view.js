// A span's details: what happened, when, how it ended, what was said, and where it sits (its
// parent, its children, its arrow in the diagram). Captured messages follow the GenAI semantic
// conventions' shapes ({role, parts}), shown as a chat.

import { el } from "./dom.js";
import { clock, took } from "./format.js";
import { kindOf, replayed, subjectOf } from "./span_words.js";

// Attributes shown in their own sections, not again in the table.
const SHOWN = new Set([
  "gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions",
  "gen_ai.tool.definitions", "gen_ai.tool.call.arguments", "gen_ai.tool.call.result",
  "input.value", "output.value", "error.type",
]);

function parsed(value) {
  if (typeof value !== "string") return value;
  try {
    return JSON.parse(value);
  } catch {
    return value;
  }
}

function pretty(value) {
  const data = parsed(value);
  return typeof data === "string" ? data : JSON.stringify(data, null, 2);
}

function part(p) {
  if (p.type === "text") return el("div", { class: "part" }, p.content);
  if (p.type === "tool_call") {
    return el("div", { class: "part tool-call" }, `calls ${p.name}`, el("pre", { class: "text" }, pretty(p.arguments ?? {})));
  }
  if (p.type === "tool_call_response") {
    return el("div", { class: "part tool-result" }, "result", el("pre", { class: "text" }, pretty(p.response ?? p.result)));
  }
  return el("div", { class: "part" }, JSON.stringify(p));
}

// A conversation ({role, parts} messages) as chat bubbles; text that is not one, as it is.
export function chat(value) {
  const messages = parsed(value);
  if (!Array.isArray(messages)) return el("pre", { class: "text" }, String(value));
  return el(
    "div",
    { class: "chat" },
    messages.map((m) =>
      el("div", { class: `message role-${m.role}` },
        el("span", { class: "role" }, m.finish_reason ? `${m.role} · ${m.finish_reason}` : m.role),
        (m.parts || []).map(part))),
  );
}

function link(text, onclick) {
  return el("a", { href: "#", onclick: (event) => { event.preventDefault(); onclick(); } }, text);
}

function section(title, ...body) {
  return [el("h4", {}, title), ...body];
}

// The tools a model call offered the model (`gen_ai.tool.definitions`): name and description.
function toolsOffered(value) {
  const tools = parsed(value);
  if (!Array.isArray(tools)) return el("pre", { class: "text" }, String(value));
  return el("ul", { class: "tools-offered" },
    tools.map((t) => {
      const f = t.function || t;
      return el("li", {}, el("code", {}, f.name || "?"), f.description ? ` — ${f.description}` : "");
    }));
}

// `where`: { spansById, arrowOf(spanId) -> number | null, select(spanId), showArrow(n) }.
export function spanDetails(span, where, fork) {
  const a = span.attributes;
  const state = span.end_ns === null ? "running" : span.status === "ERROR" ? "error" : span.status === "OK" ? "ok" : "not recorded";
  const rows = [
    ["status", state],
    ["started", clock(span.start_ns)],
    ["duration", replayed(span) ? `${took(span.duration_ms)} (replayed: taken from the record, not done again)` : took(span.duration_ms)],
    ["kind", kindOf(span)[0]],
    ["span", span.span_id],
  ];
  const parent = span.parent_span_id && where.spansById.get(span.parent_span_id);
  const arrow = where.arrowOf(span.span_id);
  const places = [
    parent ? el("li", {}, "parent: ", link(`${kindOf(parent)[0]} ${subjectOf(parent)}`, () => where.select(parent.span_id))) : null,
    arrow ? el("li", {}, "diagram: ", link(`arrow ${arrow}`, () => where.showArrow(arrow))) : null,
    span.children.length
      ? el("li", {}, `children (${span.children.length}): `,
        span.children.flatMap((c, i) => [i ? ", " : "", link(`${kindOf(c)[0]} ${subjectOf(c)}`, () => where.select(c.span_id))]))
      : null,
  ];
  const content = [];
  if (span.status === "ERROR") {
    content.push(...section("Error", el("p", { class: "error" }, `${a["error.type"] || "error"}: ${span.status_message || ""}`)));
  }
  if (a["gen_ai.tool.definitions"]) content.push(...section("Tools offered", toolsOffered(a["gen_ai.tool.definitions"])));
  if (a["gen_ai.system_instructions"]) content.push(...section("Instructions", chat([{ role: "system", parts: parsed(a["gen_ai.system_instructions"]) }])));
  if (a["gen_ai.input.messages"]) content.push(...section("Input", chat(a["gen_ai.input.messages"])));
  if (a["gen_ai.output.messages"]) content.push(...section("Output", chat(a["gen_ai.output.messages"])));
  if (a["gen_ai.tool.call.arguments"] !== undefined) content.push(...section("Arguments", el("pre", { class: "text" }, pretty(a["gen_ai.tool.call.arguments"]))));
  if (a["gen_ai.tool.call.result"] !== undefined) content.push(...section("Result", el("pre", { class: "text" }, pretty(a["gen_ai.tool.call.result"]))));
  const others = Object.entries(a).filter(([key]) => !SHOWN.has(key));
  const table = (pairs) => el("table", { class: "attributes" },
    pairs.map(([key, value]) => el("tr", {}, el("th", {}, key), el("td", {}, typeof value === "string" ? value : JSON.stringify(value)))));
  const events = (span.events || []).map((e) =>
    el("li", {}, `${e.name} at ${clock(e.time_ns)}`, Object.keys(e.attributes || {}).length ? ` ${JSON.stringify(e.attributes)}` : ""));
  return [
    el("h3", {}, `${kindOf(span)[0]} · ${subjectOf(span)}`),
    el("p", { class: "meta" }, span.name),
    fork || "",
    table(rows),
    el("ul", { class: "places" }, places),
    ...content,
    ...(events.length ? section("Events", el("ul", {}, events)) : []),
    ...(others.length ? section("Attributes", table(others)) : []),
  ];
}
