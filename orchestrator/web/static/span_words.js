// What a span is, in a person's words: its kind (run, agent, model call, tool call, delegation,
// hand-off) and its subject (the agent, model or tool it names), as the waterfall and the span
// details show them (OTel's span kinds, INTERNAL and CLIENT, say nothing to a person).

const DELEGATE = "delegate_to_";
const HANDOFF = "transfer_to_";

// [word, one-letter mark] for the span's kind.
export function kindOf(span) {
  const a = span.attributes;
  const operation = a["gen_ai.operation.name"];
  if (operation === "invoke_workflow") return ["run", "R"];
  if (operation === "invoke_agent") return ["agent", "A"];
  if (operation === "chat") return ["model call", "M"];
  if (operation === "execute_tool") {
    const tool = a["gen_ai.tool.name"] || "";
    if (tool.startsWith(HANDOFF)) return ["hand-off", "H"];
    if (a["baton.delegation.target"] || tool.startsWith(DELEGATE)) return ["delegation", "D"];
    return ["tool call", "T"];
  }
  return ["span", "·"];
}

// The agent, model or tool the span is about: what a row leads with.
export function subjectOf(span) {
  const a = span.attributes;
  const operation = a["gen_ai.operation.name"];
  if (operation === "invoke_workflow") return "run";
  if (operation === "invoke_agent") return a["gen_ai.agent.name"] || span.name;
  if (operation === "chat") return a["gen_ai.request.model"] || span.name;
  if (operation === "execute_tool") {
    const tool = a["gen_ai.tool.name"] || span.name;
    if (tool.startsWith(HANDOFF)) return `⇒ ${tool.slice(HANDOFF.length)}`;
    const target = a["baton.delegation.target"] || (tool.startsWith(DELEGATE) ? tool.slice(DELEGATE.length) : null);
    return target ? `→ ${target}` : tool;
  }
  return span.name;
}

// A step taken from the run's record (a replay, or a fork before its fork point), not done again.
export function replayed(span) {
  return Boolean(span.attributes["baton.step.replayed"]);
}
