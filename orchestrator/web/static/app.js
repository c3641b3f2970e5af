// Baton's web UI: plain ES module over the JSON API. User data only ever enters the page as
// text (textContent); the only HTML inserted is the SVG that Mermaid renders in strict mode.

import { firstDifference, markArrow } from "./compare.js";
import { el } from "./dom.js";
import { cost, when } from "./format.js";
import { spanDetails } from "./span_view.js";
import { kindOf } from "./span_words.js";
import { Waterfall } from "./waterfall.js";

const KEY = "baton.apiKey";

// --- API -----------------------------------------------------------------------------------

function authHeaders() {
  const key = sessionStorage.getItem(KEY);
  return key ? { Authorization: `Bearer ${key}` } : {};
}

class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

async function api(path, options = {}) {
  const response = await fetch(path, {
    ...options,
    headers: { ...authHeaders(), ...(options.headers || {}) },
  });
  if (response.status === 401) askForKey();
  const type = response.headers.get("content-type") || "";
  const body = type.includes("json") ? await response.json() : await response.text();
  if (!response.ok) {
    const error = body && body.error ? body.error : { code: "http_error", message: String(body) };
    throw new ApiError(response.status, error.code, error.message);
  }
  return body;
}

// Server-Sent Events over fetch (EventSource cannot send an Authorization header).
async function* events(path, after = 0) {
  let last = after;
  for (let attempt = 0; attempt < 20; attempt++) {
    const response = await fetch(path, {
      headers: { ...authHeaders(), ...(last ? { "Last-Event-ID": String(last) } : {}) },
    });
    if (!response.ok) throw new ApiError(response.status, "events", await response.text());
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    let event = { id: null, type: "message", data: [] };
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += value;
        let cut;
        while ((cut = buffer.indexOf("\n")) >= 0) {
          const line = buffer.slice(0, cut).replace(/\r$/, "");
          buffer = buffer.slice(cut + 1);
          if (line === "") {
            if (event.data.length) {
              if (event.id) last = Number(event.id);
              const data = JSON.parse(event.data.join("\n"));
              yield { id: last, type: event.type, data };
              if (event.type === "run_finished") return;
            }
            event = { id: null, type: "message", data: [] };
          } else if (!line.startsWith(":")) {
            const colon = line.indexOf(":");
            const field = colon < 0 ? line : line.slice(0, colon);
            const text = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
            if (field === "data") event.data.push(text);
            else if (field === "event") event.type = text;
            else if (field === "id") event.id = text;
          }
        }
      }
      return; // the server ended the stream
    } catch (error) {
      await new Promise((resolve) => setTimeout(resolve, 500 * (attempt + 1)));
    }
  }
}

// --- DOM helpers ---------------------------------------------------------------------------

const $ = (id) => document.getElementById(id);

function statusBadge(status) {
  return el("span", { class: `status status-${status}` }, status);
}

function duration(seconds) {
  if (seconds === null || seconds === undefined) return "–";
  return seconds < 10 ? `${(seconds * 1000).toFixed(0)} ms` : `${seconds.toFixed(1)} s`;
}

function askForKey() {
  const form = $("key-form");
  if (form) form.hidden = false;
}

// Every page's header: the brand, the pages (the current one marked), and the form that asks
// for an API key when the service wants one (hidden until a 401).
const PAGES = [
  ["runs", "/", "Runs"], ["threads", "/threads", "Threads"], ["agents", "/agents", "Agents"],
  ["experiments", "/experiments", "Experiments"],
];

function pageHeader(current) {
  const header = document.querySelector("header.top");
  const links = PAGES.map(([name, href, label]) =>
    el("a", { href, "aria-current": name === current ? "page" : null }, label),
  );
  const form = el(
    "form",
    { id: "key-form", class: "key", hidden: true },
    el("input", { id: "key-input", type: "password", placeholder: "API key", autocomplete: "off" }),
    el("button", { type: "submit" }, "Use key"),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    sessionStorage.setItem(KEY, $("key-input").value.trim());
    location.reload();
  });
  header.replaceChildren(el("a", { class: "brand", href: "/" }, "Baton"), el("nav", {}, links), form);
}

let renderCount = 0;
// `natural`: drawn at its own size (the container scrolls) instead of fitted to the width.
async function drawMermaid(container, text, natural = false) {
  if (!window.mermaid) {
    throw new Error("Mermaid is not installed on this server: run `make setup` (npm ci in orchestrator/web).");
  }
  window.mermaid.initialize({ startOnLoad: false, securityLevel: "strict", maxTextSize: 100000 });
  renderCount += 1;
  const { svg } = await window.mermaid.render(`mermaid-${renderCount}`, text);
  container.innerHTML = svg; // Mermaid's own output, sanitized in strict mode
  const drawn = container.querySelector("svg");
  if (natural && drawn && drawn.viewBox.baseVal.width) drawn.style.width = `${drawn.viewBox.baseVal.width}px`;
  return drawn;
}

function showError(container, error) {
  container.replaceChildren(el("p", { class: "error" }, error.message || String(error)));
}

// --- Runs page -----------------------------------------------------------------------------

async function runsPage() {
  const limit = 25;
  let offset = 0;
  await offerAgents($("submit-error"), $("agent"), $("agent-filter"));

  async function load() {
    const query = new URLSearchParams({ limit, offset });
    if ($("status-filter").value) query.set("status", $("status-filter").value);
    if ($("agent-filter").value) query.set("agent", $("agent-filter").value);
    const page = await api(`/v1/runs?${query}`);
    const rows = page.runs.map((run) =>
      el(
        "tr",
        { "data-run": run.id },
        el("td", {}, el("a", { href: `/runs/${run.id}` }, run.id.slice(0, 12)), lineageTag(run)),
        el("td", {}, statusBadge(run.status)),
        el("td", {}, run.entry_agent || run.requested_agent || "–"),
        // The release label (`v2`) where the team has one, else the config's digest.
        el("td", { title: run.version || "" }, run.version ? run.version.split("+")[0] : "–"),
        el("td", {}, when(run.created_at)),
        el("td", {}, duration(run.duration_s)),
        el("td", {}, `${run.usage.input_tokens}/${run.usage.output_tokens}`),
        el("td", {}, cost(run.usage.cost_usd, run.usage.unpriced_calls)),
        el("td", { class: "task" }, run.task.slice(0, 140)),
      ),
    );
    $("runs").tBodies[0].replaceChildren(...rows);
    const last = Math.min(offset + limit, page.total);
    $("page-info").textContent = page.total ? `${offset + 1}–${last} of ${page.total}` : "no runs";
    const all = page.usage;
    $("runs-total").textContent = page.total
      ? `All ${page.total} matching runs: tokens ${all.input_tokens}/${all.output_tokens}, ` +
        `${all.model_calls} model calls, cost ${cost(all.cost_usd, all.unpriced_calls)}`
      : "";
    $("prev").disabled = offset === 0;
    $("next").disabled = last >= page.total;
  }

  $("prev").addEventListener("click", () => { offset = Math.max(0, offset - limit); load(); });
  $("next").addEventListener("click", () => { offset += limit; load(); });
  $("status-filter").addEventListener("change", () => { offset = 0; load(); });
  $("agent-filter").addEventListener("change", () => { offset = 0; load(); });
  $("submit-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    $("submit-error").textContent = "";
    const body = { task: $("task").value, stream: true };
    if ($("agent").value) body.agent = $("agent").value;
    if ($("token_budget").value) body.token_budget = Number($("token_budget").value);
    if ($("deadline_s").value) body.deadline_s = Number($("deadline_s").value);
    $("run-button").disabled = true;
    try {
      const run = await api("/v1/runs", {
        method: "POST",
        headers: { "Content-Type": "application/json", "Idempotency-Key": crypto.randomUUID() },
        body: JSON.stringify(body),
      });
      location.assign(`/runs/${run.id}`);
    } catch (error) {
      $("submit-error").textContent = error.message;
      $("run-button").disabled = false;
    }
  });
  await load();
  setInterval(() => load().catch(() => {}), 5000);
}

// The team's agents as options of each select (entry agent, filters).
async function offerAgents(errorLine, ...selects) {
  try {
    const agents = await api("/v1/agents");
    for (const agent of agents.agents) {
      for (const select of selects) select.append(el("option", { value: agent.name }, agent.name));
    }
  } catch (error) {
    errorLine.textContent = error.message;
  }
}

// A turn of a thread, submitted from a form: the message, the entry agent chosen, and what to do
// if a turn is under way.
function submitTurn(threadId, task, agent, strategy = "reject") {
  const body = { task, multitask_strategy: strategy };
  if (agent) body.agent = agent;
  return api(`/v1/threads/${threadId}/runs`, {
    method: "POST",
    headers: { "Content-Type": "application/json", "Idempotency-Key": crypto.randomUUID() },
    body: JSON.stringify(body),
  });
}

// --- Threads page --------------------------------------------------------------------------

async function threadsPage() {
  const limit = 25;
  let offset = 0;
  await offerAgents($("thread-error"), $("agent"));

  async function load() {
    const page = await api(`/v1/threads?${new URLSearchParams({ limit, offset })}`);
    const rows = page.threads.map((thread) =>
      el(
        "tr",
        { "data-thread": thread.id },
        el("td", {}, el("a", { href: `/threads/${thread.id}` }, thread.id.slice(0, 12))),
        el("td", { class: "task" }, (thread.title || "–").slice(0, 140)),
        el("td", { class: "turn-count" }, String(thread.turn_count)),
        el("td", {}, when(thread.created_at)),
        el("td", {}, thread.last_turn_at ? when(thread.last_turn_at) : "–"),
        el("td", { class: "meta" }, Object.entries(thread.metadata).map(([k, v]) => `${k}: ${v}`).join(" · ") || "–"),
      ),
    );
    $("threads").tBodies[0].replaceChildren(...rows);
    const last = Math.min(offset + limit, page.total);
    $("page-info").textContent = page.total ? `${offset + 1}–${last} of ${page.total}` : "no threads yet";
    $("prev").disabled = offset === 0;
    $("next").disabled = last >= page.total;
  }

  $("prev").addEventListener("click", () => { offset = Math.max(0, offset - limit); load(); });
  $("next").addEventListener("click", () => { offset += limit; load(); });
  $("thread-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    $("thread-error").textContent = "";
    $("start-button").disabled = true;
    try {
      const thread = await api("/v1/threads", {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: "{}",
      });
      await submitTurn(thread.id, $("task").value, $("agent").value);
      location.assign(`/threads/${thread.id}`);
    } catch (error) {
      $("thread-error").textContent = error.message;
      $("start-button").disabled = false;
    }
  });
  await load();
  setInterval(() => load().catch(() => {}), 5000);
}

// A replay or fork says what it comes from: in the runs list under its id, on its page in full.
function lineageTag(run) {
  if (!run.replay_of) return null;
  return el("div", { class: "lineage meta" }, `${run.fork ? "fork" : "replay"} of `,
    el("a", { href: `/runs/${run.replay_of}` }, run.replay_of.slice(0, 12)));
}

function lineageLine(run) {
  if (run.thread_id && !run.replay_of) {
    return ["A turn of ", el("a", { href: `/threads/${run.thread_id}`, id: "thread-link" }, `thread ${run.thread_id.slice(0, 12)}`), "."];
  }
  if (!run.replay_of) return [];
  const original = el("a", { href: `/runs/${run.replay_of}` }, `run ${run.replay_of.slice(0, 12)}`);
  if (!run.fork) return ["Replay of ", original, ": every step taken from its record, none done again."];
  const from = run.fork_from ? run.fork_from.label : "the first step whose request differs";
  return ["Fork of ", original, `: its record up to ${from}, live from there.`];
}

// --- Run page ------------------------------------------------------------------------------

const FINAL = new Set([
  "succeeded", "failed", "cancelled", "limit_exceeded", "budget_exceeded", "guardrail_tripped",
  "interrupted",
]);

async function runPage(asked) {
  let runId = asked; // a short id (a prefix) until the run is read: then the whole id
  let diagramPage = 1;
  let arrows = [];
  let spansById = new Map();
  let selected = null;
  let refreshing = null;
  let again = false;
  let current = null; // the run as last read
  // While the run goes on, what its events have said so far (the stored run says it at the end).
  const live = { input: 0, output: 0, calls: 0, entry: null, started: null, answer: null, answerKey: null };
  const service = await api("/v1/service").catch(() => ({ step_log: true }));

  // Why a span cannot start a fork, or null when it can.
  function whyNoFork(span) {
    if (!service.step_log) return "This service keeps no step log (its store is in memory): its runs cannot be forked.";
    if (document.body.dataset.state !== "finished") return "A fork starts from a run that has ended: this one is still going.";
    if (span.attributes["baton.step"]) return null;
    const [kind] = kindOf(span);
    if (kind === "run") return "The run itself is not a step of its record: fork from its entry agent to do it all again live.";
    return `A fork starts at a step of the run's record (an agent, a model call, a tool call or a delegation); this ${kind} is not one.`;
  }

  function selectSpan(spanId) {
    const span = spansById.get(spanId);
    if (!span) return;
    selected = spanId;
    waterfall.select(spanId);
    const why = whyNoFork(span);
    const fork = why === null
      ? el("button", { type: "button", id: "fork-button", onclick: () => forkFrom(spanId) }, "Fork from here")
      : el("p", { id: "fork-why", class: "meta" }, why);
    const where = {
      spansById,
      arrowOf: (id) => (arrows.indexOf(id) + 1) || null,
      select: selectSpan,
      showArrow: (n) => {
        const svg = $("diagram").querySelector("svg");
        if (!svg) return;
        for (const node of svg.querySelectorAll(".arrow-selected")) node.classList.remove("arrow-selected");
        markArrow(svg, n, "arrow-selected");
        $("diagram").scrollIntoView({ block: "nearest" });
      },
    };
    $("span-details").replaceChildren(...spanDetails(span, where, fork));
  }

  // A new run that takes this one's record up to the step, and goes on live from there.
  async function forkFrom(spanId) {
    try {
      const forked = await api(`/v1/runs/${runId}/fork`, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ from_span: spanId }),
      });
      location.assign(`/runs/${forked.id}`);
    } catch (error) {
      showError($("span-details"), error);
    }
  }

  // This run's diagram above another's (its original, or ?compare=ID), each at full size, and
  // where their steps differ, in words; the first arrow that differs is marked in both.
  async function drawComparison(otherId) {
    const detail = $("detail").value;
    const path = (id) => `/v1/runs/${id}/diagram?format=json&comparable=true&detail=${detail}`;
    const [mine, theirs, compared] = await Promise.all([
      api(path(runId)), api(path(otherId)),
      api(`/v1/runs/${runId}/compare?with=${encodeURIComponent(otherId)}`),
    ]);
    $("comparison").hidden = false;
    const link = $("compare-link");
    link.textContent = `run ${compared.other.slice(0, 12)}`;
    link.href = `/runs/${compared.other}`;
    $("compare-differences").replaceChildren(...compared.differences.map((said) => el("li", {}, said)));
    const [here, there] = await Promise.all([
      drawMermaid($("compare-this"), mine.mermaid, true),
      drawMermaid($("compare-other"), theirs.mermaid, true),
    ]);
    const difference = firstDifference(mine.mermaid, theirs.mermaid);
    if (difference.arrow) {
      markArrow(here, difference.arrow);
      markArrow(there, difference.arrow);
    }
    const steps = compared.same
      ? "The same steps, one for one (timings and tokens aside)."
      : `${compared.differences.length} difference${compared.differences.length === 1 ? "" : "s"} in its steps:`;
    const arrow = difference.line < 0 ? " The same diagram, arrow for arrow."
      : difference.arrow ? ` First difference at arrow ${difference.arrow} (marked).` : "";
    $("compare-verdict").textContent = steps + arrow;
  }

  const waterfall = new Waterfall($("waterfall"), (spanId) => selectSpan(spanId));
  $("span-filter-form").addEventListener("submit", (event) => event.preventDefault());
  $("span-filter").addEventListener("input", () => {
    const shown = waterfall.filter($("span-filter").value);
    $("span-count").textContent = `${shown} of ${spansById.size} spans`;
  });

  function drawWaterfall(trace) {
    spansById = new Map();
    const walk = (nodes) => nodes.forEach((node) => { spansById.set(node.span_id, node); walk(node.children); });
    walk(trace.spans);
    waterfall.draw(trace);
    const shown = waterfall.filter($("span-filter").value);
    $("span-count").textContent = shown === trace.span_count ? `${trace.span_count} spans` : `${shown} of ${trace.span_count} spans`;
    if (selected) selectSpan(selected);
  }

  async function drawDiagram() {
    const detail = $("detail").value;
    const view = await api(`/v1/runs/${runId}/diagram?format=json&detail=${detail}&page=${diagramPage}`);
    arrows = view.arrows;
    diagramPage = view.page;
    $("diagram-page").textContent = `page ${view.page} of ${view.pages}`;
    $("diagram-prev").disabled = view.page <= 1;
    $("diagram-next").disabled = view.page >= view.pages;
    $("folded").replaceChildren(...view.folded.map((text) => el("li", {}, text)));
    const svg = await drawMermaid($("diagram"), view.mermaid);
    // Each numbered arrow is a span: click its number or its text to see the span.
    const numbers = svg.querySelectorAll(".sequenceNumber");
    const texts = svg.querySelectorAll(".messageText");
    numbers.forEach((number, index) => {
      const spanId = arrows[Number(number.textContent) - 1];
      for (const node of [number, texts[index]]) {
        if (!node || !spanId) continue;
        node.dataset.span = spanId;
        node.classList.add("arrow-link");
        node.addEventListener("click", () => selectSpan(spanId));
      }
    });
  }

  // Calls waiting for a person: each with what it would do, and Approve / Deny.
  // Draws overlap (an event's and the page's first): only the latest request's answer is drawn,
  // or a stale one (asked before the call waited) would take away the box being typed in.
  let approvalsAsked = 0;
  async function drawApprovals() {
    const asked = ++approvalsAsked;
    const pending = await api(`/v1/runs/${runId}/approvals`);
    if (asked !== approvalsAsked) return;
    $("approvals").hidden = pending.length === 0;
    // A call already shown keeps its element: what the person is typing or editing stays.
    const shown = new Map([...$("approval-list").children].map((li) => [li.dataset.call, li]));
    $("approval-list").replaceChildren(
      ...pending.map((call) => {
        if (shown.has(call.call_id)) return shown.get(call.call_id);
        const message = el("input", { type: "text", placeholder: "message (told to the model if denied)", "aria-label": "message" });
        // The arguments may be edited before approving: the call is then made with the edit.
        const edit = el("textarea", { class: "text arguments", rows: 4, "aria-label": "arguments" });
        const shownArguments = call.arguments === null ? "" : JSON.stringify(call.arguments, null, 2);
        edit.value = shownArguments;
        edit.readOnly = call.arguments === null; // (not shown whole: it cannot be edited)
        const problem = el("p", { class: "error", hidden: true });
        const decide = (approve) => async () => {
          const body = { approve, message: message.value };
          if (approve && edit.value !== shownArguments) {
            try {
              body.arguments = JSON.parse(edit.value);
            } catch (error) {
              problem.textContent = `the arguments are not JSON: ${error.message}`;
              problem.hidden = false;
              return;
            }
          }
          try {
            await api(`/v1/runs/${runId}/approvals/${encodeURIComponent(call.call_id)}`, {
              method: "POST",
              headers: { "Content-Type": "application/json" },
              body: JSON.stringify(body),
            });
          } catch (error) {
            // An edit the tool does not take: said here, and the call still waits.
            if (error instanceof ApiError && error.code === "invalid_arguments") {
              problem.textContent = error.message;
              problem.hidden = false;
              return;
            }
            drawApprovals();
            throw error;
          }
          problem.hidden = true;
          drawApprovals();
        };
        const left = Math.max(0, Math.round(call.expires_at - Date.now() / 1000));
        return el(
          "li",
          { class: "approval", "data-call": call.call_id },
          el("p", {}, el("strong", {}, call.agent), " wants to call ", el("code", {}, call.tool), ` (expires in ${left} s)`),
          edit,
          problem,
          message,
          el("button", { type: "button", class: "approve", onclick: decide(true) }, "Approve"),
          " ",
          el("button", { type: "button", class: "deny", onclick: decide(false) }, "Deny"),
        );
      }),
    );
  }

  // Questions an agent asks the person (ask_user): each with its suggested answers and a box.
  let questionsAsked = 0;
  async function drawQuestions() {
    const asked = ++questionsAsked;
    const waiting = await api(`/v1/runs/${runId}/input`);
    if (asked !== questionsAsked) return; // (as for approvals)
    $("questions").hidden = waiting.length === 0;
    const shown = new Map([...$("question-list").children].map((li) => [li.dataset.question, li]));
    $("question-list").replaceChildren(
      ...waiting.map((question) => {
        if (shown.has(question.question_id)) return shown.get(question.question_id);
        const box = el("input", { type: "text", class: "answer-text", placeholder: "your answer", "aria-label": "answer" });
        const send = async (answer) => {
          try {
            await api(`/v1/runs/${runId}/input`, {
              method: "POST",
              headers: { "Content-Type": "application/json" },
              body: JSON.stringify({ answer, question_id: question.question_id }),
            });
          } finally {
            drawQuestions();
          }
        };
        const form = el(
          "form",
          {
            class: "answer",
            onsubmit: (e) => {
              e.preventDefault();
              if (box.value.trim()) send(box.value); // (an empty box sends nothing)
              else box.focus();
            },
          },
          box,
          el("button", { type: "submit", class: "send-answer" }, "Answer"),
        );
        const choices = question.choices.map((choice) =>
          el("button", { type: "button", class: "choice", onclick: () => send(choice) }, choice));
        return el(
          "li",
          { class: "question", "data-question": question.question_id },
          el("p", {}, el("strong", {}, question.agent), " asks:"),
          el("pre", { class: "text" }, question.question),
          ...(choices.length ? [el("p", {}, ...choices)] : []),
          form,
        );
      }),
    );
  }

  // The header's figures: the stored run's once it has ended, what the events said before.
  function showMeta() {
    const run = current;
    if (!run) return;
    const ended = FINAL.has(run.status);
    const usage = run.usage;
    const input = ended ? usage.input_tokens : Math.max(usage.input_tokens, live.input);
    const output = ended ? usage.output_tokens : Math.max(usage.output_tokens, live.output);
    const calls = ended ? usage.model_calls : Math.max(usage.model_calls, live.calls);
    const started = run.started_at || live.started;
    const seconds = ended ? run.duration_s : started ? Math.max(0, Date.now() / 1000 - started) : null;
    const entry = run.entry_agent || live.entry || run.requested_agent;
    const answered = run.tree && run.tree.answered_by && run.tree.answered_by !== entry ? run.tree.answered_by : null;
    $("run-meta").replaceChildren(...[
      ["entry", entry || "(config's entry)"],
      answered ? ["answered by", answered] : null,
      ["created", when(run.created_at)],
      ["duration", duration(seconds)],
      ["tokens", `${input}/${output}`],
      ["model calls", String(calls)],
      ["cost", cost(usage.cost_usd, usage.unpriced_calls)],
      run.version ? ["version", run.version] : null,
      run.began_on && run.began_on !== run.version ? ["began on", run.began_on] : null,
    ].filter(Boolean).flatMap(([name, value], i) => [
      i ? " · " : "", `${name} `, el("span", { "data-meta": name.replace(" ", "-") }, value),
    ]));
  }

  async function refresh() {
    if (refreshing) { again = true; return refreshing; }
    refreshing = (async () => {
      const run = await api(`/v1/runs/${runId}`);
      if (runId !== run.id) {
        runId = run.id; // the page's address names the run in full from now on
        history.replaceState(null, "", `/runs/${run.id}${location.search}`);
      }
      current = run;
      // Live from the first read (before the diagram is drawn): a short run may be over by then.
      if (!FINAL.has(run.status) && !document.body.dataset.state) document.body.dataset.state = "live";
      document.title = `Baton · run ${run.id.slice(0, 12)}`;
      $("run-title").textContent = `Run ${run.id.slice(0, 12)}`;
      $("run-status").replaceWith(Object.assign(statusBadge(run.status), { id: "run-status" }));
      showMeta();
      $("run-lineage").replaceChildren(...lineageLine(run));
      $("run-lineage").hidden = !run.replay_of && !run.thread_id;
      $("run-task").textContent = run.task;
      const ended = FINAL.has(run.status);
      const failed = run.status !== "succeeded" && ended;
      $("answer-heading").textContent = failed ? "Error" : "Answer";
      // A structured answer (the entry agent's output_schema) is shown as indented JSON.
      const answer = run.output_json != null ? JSON.stringify(run.output_json, null, 2) : run.output;
      $("run-answer").textContent = failed ? run.error || ""
        : ended ? answer || "" : live.answer ?? "…";
      // The shared state it ended with (its agents' writes), when it has one.
      const hasState = run.state && Object.keys(run.state).length > 0;
      $("state-heading").hidden = $("run-state").hidden = !hasState;
      $("run-state").textContent = hasState ? JSON.stringify(run.state, null, 2) : "";
      $("cancel-button").hidden = ended;
      const [trace] = await Promise.all([api(`/v1/runs/${runId}/trace`), drawDiagram(), drawApprovals(), drawQuestions()]);
      drawWaterfall(trace);
      return run;
    })();
    try {
      return await refreshing;
    } finally {
      refreshing = null;
      if (again) { again = false; refresh(); }
    }
  }

  // Streamed model text: the entry agent's grows in the Answer box (a new step's text replaces
  // the last step's); other agents' in blocks of their own, one per model call.
  function showText(delta) {
    const key = `${delta.invocation}/${delta.step}`;
    if (delta.chain.length <= 1) {
      if (live.answerKey !== key) { live.answerKey = key; live.answer = ""; }
      live.answer += delta.text;
      $("run-answer").textContent = live.answer;
      return;
    }
    let block = [...$("streams").children].find((b) => b.dataset.key === key);
    if (!block) {
      block = el("div", { class: "stream", "data-key": key },
        el("h3", {}, delta.agent, el("span", { class: "meta" }, ` · step ${delta.step}`)),
        el("pre", { class: "text" }));
      $("streams").append(block);
      $("live-text").hidden = false;
    }
    block.querySelector("pre").append(delta.text);
  }

  $("detail").addEventListener("change", () => { diagramPage = 1; drawDiagram(); });
  $("diagram-prev").addEventListener("click", () => { diagramPage -= 1; drawDiagram(); });
  $("diagram-next").addEventListener("click", () => { diagramPage += 1; drawDiagram(); });
  $("cancel-button").addEventListener("click", () => api(`/v1/runs/${runId}/cancel`, { method: "POST" }));

  const run = await refresh();
  const compareWith = new URLSearchParams(location.search).get("compare") || run.replay_of;
  document.body.dataset.state = FINAL.has(run.status) ? "finished" : "live";
  if (FINAL.has(run.status)) {
    if (compareWith) await drawComparison(compareWith);
    document.body.dataset.compared = compareWith ? "yes" : "no";
    return;
  }
  // Live: the header counts from the events and its clock runs; the diagram and the waterfall
  // grow with each event (at most a few redraws a second).
  const ticking = setInterval(showMeta, 500);
  let timer = null;
  for await (const event of events(`/v1/runs/${runId}/events`)) {
    const data = event.data;
    if (event.type === "model_delta") { showText(data); continue; }
    if (event.type === "run_started") live.started = data.ts;
    if (event.type === "agent_started" && data.chain.length <= 1) live.entry = data.agent;
    if (event.type === "model_finished") {
      live.input += data.input_tokens;
      live.output += data.output_tokens;
      live.calls += 1;
    }
    showMeta();
    $("run-status").textContent = event.type === "run_finished" ? data.status
      : event.type === "input_requested" ? "input_required" : "running";
    if (event.type === "run_finished") break;
    if (event.type === "approval_requested" || event.type === "approval_decided") drawApprovals();
    if (event.type === "input_requested" || event.type === "input_provided") drawQuestions();
    if (!timer) timer = setTimeout(() => { timer = null; refresh(); }, 250);
  }
  clearInterval(ticking);
  clearTimeout(timer);
  await refresh();
  document.body.dataset.state = "finished";
  if (selected) selectSpan(selected); // a fork may start here now
  if (compareWith) await drawComparison(compareWith);
  document.body.dataset.compared = compareWith ? "yes" : "no";
}

// --- Thread page ---------------------------------------------------------------------------

// A conversation: its turns in order, each with its task, its answer and its diagram; a turn
// under way is drawn live from its events, and turns submitted meanwhile appear.
async function threadPage(threadId) {
  const drawn = new Map(); // run id -> the status its card was drawn with
  const following = new Set();

  function turnCard(turn, index) {
    const ended = FINAL.has(turn.status);
    const failed = ended && turn.status !== "succeeded";
    return el(
      "section",
      { class: "card turn", "data-run": turn.run_id, "data-status": turn.status },
      el("h2", {}, `Turn ${index + 1} `, statusBadge(turn.status), " ",
        el("a", { href: `/runs/${turn.run_id}`, class: "meta" }, `run ${turn.run_id.slice(0, 12)}`)),
      el("div", { class: "meta turn-agents" }, turnAgents(turn)),
      el("h3", {}, "Task"),
      el("pre", { class: "text task" }, turn.task),
      el("h3", {}, failed ? "Error" : "Answer"),
      el("pre", { class: "text answer" }, (failed ? turn.error : turn.output) || (ended ? "" : "…")),
      el("div", { class: "diagram" }),
    );
  }

  // Which agent the turn entered at, and which answered (when another took the conversation).
  function turnAgents(turn) {
    const entered = `entered at ${turn.entry_agent || "the entry agent"}`;
    if (!turn.answered_by) return entered;
    return turn.answered_by === turn.entry_agent ? `${entered}, which answered` : `${entered}; answered by ${turn.answered_by}`;
  }

  async function drawTurn(card, runId) {
    const text = await api(`/v1/runs/${runId}/diagram`);
    await drawMermaid(card.querySelector(".diagram"), text);
  }

  async function follow(runId) {
    if (following.has(runId)) return;
    following.add(runId);
    let timer = null;
    for await (const event of events(`/v1/runs/${runId}/events`)) {
      if (event.type === "model_delta") continue;
      if (event.type === "run_finished") break;
      if (!timer) {
        timer = setTimeout(() => {
          timer = null;
          const card = document.querySelector(`.turn[data-run="${runId}"]`);
          if (card) drawTurn(card, runId);
        }, 300);
      }
    }
    clearTimeout(timer);
    following.delete(runId);
    await refresh();
  }

  async function refresh() {
    const thread = await api(`/v1/threads/${threadId}`);
    document.title = `Baton · thread ${thread.id.slice(0, 12)}`;
    $("thread-title").textContent = `Thread ${thread.id.slice(0, 12)}`;
    const meta = Object.entries(thread.metadata).map(([k, v]) => `${k}: ${v}`).join(" · ");
    $("thread-meta").textContent = `${thread.turns.length} turn${thread.turns.length === 1 ? "" : "s"}${meta ? ` · ${meta}` : ""}`;
    // The state its next turn begins with (and its version, which a change names).
    const hasState = thread.state && Object.keys(thread.state).length > 0;
    $("thread-state-heading").hidden = $("thread-state").hidden = !hasState;
    $("thread-state-heading").textContent = `Shared state (version ${thread.state_version})`;
    $("thread-state").textContent = hasState ? JSON.stringify(thread.state, null, 2) : "";
    const list = $("turns");
    await Promise.all(thread.turns.map(async (turn, index) => {
      if (drawn.get(turn.run_id) === turn.status) return;
      const card = turnCard(turn, index);
      const old = list.querySelector(`.turn[data-run="${turn.run_id}"]`);
      if (old) old.replaceWith(card); else list.append(card);
      drawn.set(turn.run_id, turn.status);
      await drawTurn(card, turn.run_id);
      if (!FINAL.has(turn.status)) follow(turn.run_id);
    }));
    const live = thread.turns.some((t) => !FINAL.has(t.status));
    document.body.dataset.state = live ? "live" : "finished";
  }

  await offerAgents($("turn-error"), $("agent"));
  $("agent").append(el("option", { value: "last" }, "last (the agent that answered last)"));
  $("turn-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    $("turn-error").textContent = "";
    $("send-button").disabled = true;
    try {
      await submitTurn(threadId, $("task").value, $("agent").value, $("strategy").value);
      $("task").value = "";
      await refresh();
    } catch (error) {
      $("turn-error").textContent = error.message;
    } finally {
      $("send-button").disabled = false;
    }
  });
  await refresh();
  // Turns submitted from elsewhere (the API, `baton chat`) appear without a reload.
  setInterval(() => refresh().catch(() => {}), 3000);
}

// --- Agents page ---------------------------------------------------------------------------

async function agentsPage() {
  try {
    const [text, agents, service] = await Promise.all(
      [api("/v1/agents/diagram"), api("/v1/agents"), api("/v1/service")]);
    await drawMermaid($("topology"), text);
    // The versions of the team running: new runs go to the current one; an older one finishes
    // its runs, then stops.
    $("versions").textContent = "Version " + service.versions.map((v) =>
      `${v.version}${v.current ? " (new runs)" : ` (finishing ${v.runs} run${v.runs === 1 ? "" : "s"})`}`,
    ).join(", ");
    const rows = agents.agents.map((agent) =>
      el(
        "tr",
        {},
        el("td", {}, agent.name, agent.name === agents.topology.entry ? " (entry)" : ""),
        el("td", {}, agent.description),
        el("td", {}, agent.capabilities.join(", ")),
        el("td", {}, agent.model),
        el("td", {}, agent.tools.map((t) => t.split(":").pop()).join(", ") || "–"),
        el("td", {}, agent.delegates.join(", ") || "–"),
        el("td", { class: "handoffs" }, agent.handoffs.join(", ") || "–"),
        el("td", { class: "guardrails" }, agent.guardrails.length ? el("ul", { class: "plain" }, agent.guardrails.map((g) => el("li", {}, g))) : "–"),
        el("td", { class: "output-schema" }, schemaSummary(agent.output_schema)),
        el("td", {}, agent.own_actors === null ? "shared host" : `own actors (${agent.own_actors})`,
          el("span", { class: "meta" }, ` · ${agent.replicas.length} replica${agent.replicas.length === 1 ? "" : "s"}`),
          agent.replicas.length ? el("span", { class: "meta" }, ` on ${[...new Set(agent.replicas.map((r) => (r.node_id || "?").slice(0, 8)))].join(", ")}`) : null,
          agent.replicas.some((r) => r.shares_with.length) ? el("span", { class: "meta" }, ` with ${agent.replicas[0].shares_with.join(", ")}`) : null),
      ),
    );
    $("agents").tBodies[0].replaceChildren(...rows);
    // Autoscaled hosts: each decision of the last hour, newest first.
    $("scaling-card").hidden = agents.scaling.length === 0;
    $("scaling").tBodies[0].replaceChildren(
      ...agents.scaling.toReversed().map((d) =>
        el("tr", {},
          el("td", {}, new Date(d.at * 1000).toLocaleTimeString()),
          el("td", {}, d.host),
          el("td", {}, `${d.before} → ${d.after}`),
          el("td", {}, d.why))));
  } catch (error) {
    showError($("topology"), error);
  }
}

// An agent's output schema in brief: the fields of its JSON answer (or the model's path), the
// whole schema on hover.
function schemaSummary(schema) {
  if (schema === null || schema === undefined) return "text";
  if (typeof schema === "string") return el("code", {}, schema);
  const fields = Object.keys(schema.properties || {});
  return el("span", { title: JSON.stringify(schema, null, 2) },
    "JSON", fields.length ? `: ${fields.join(", ")}` : "");
}

// --- Experiments: `baton eval`'s results ---------------------------------------------------

function money(usd) {
  return usd === null || usd === undefined ? "–" : `$${usd.toFixed(4)}`;
}

function outcomeBadge(outcome) {
  return el("span", { class: `outcome outcome-${outcome}` }, outcome);
}

async function experimentsPage() {
  const page = await api("/v1/experiments");
  $("none").hidden = page.experiments.length > 0;
  $("experiments").tBodies[0].replaceChildren(...page.experiments.map((x) =>
    el(
      "tr",
      { "data-experiment": x.id },
      el("td", {}, el("a", { href: `/experiments/${x.id}` }, x.id.slice(0, 12))),
      el("td", {}, x.dataset),
      el("td", {}, `${x.config} ${x.config_digest}`),
      el("td", { class: "passed" }, `${x.passed}/${x.total} (${Math.round(x.pass_rate * 100)}%)`),
      el("td", {}, money(x.cost_usd)),
      el("td", {}, duration(x.p50_s)),
      el("td", {}, duration(x.p95_s)),
      el("td", {}, when(x.created_at)),
    ),
  ));
}

// Outcomes ranked, to say whether a case got better or worse from one experiment to another.
const RANK = { pass: 2, fail: 1, error: 0 };

async function experimentPage(experimentId) {
  const experiment = await api(`/v1/experiments/${experimentId}`);
  $("experiment-title").textContent = `Experiment ${experiment.id.slice(0, 12)} · ${experiment.dataset}`;
  $("experiment-figures").textContent =
    `${experiment.passed}/${experiment.total} passed (${Math.round(experiment.pass_rate * 100)}%) · ` +
    `${money(experiment.cost_usd)} · p50 ${duration(experiment.p50_s)} · p95 ${duration(experiment.p95_s)} · ` +
    `${experiment.config} ${experiment.config_digest} · ${when(experiment.created_at)}`;
  const others = (await api(`/v1/experiments?${new URLSearchParams({ dataset: experiment.dataset })}`))
    .experiments.filter((x) => x.id !== experiment.id);
  $("compare-with").append(...others.map((x) =>
    el("option", { value: x.id }, `${x.id.slice(0, 12)} · ${x.passed}/${x.total} · ${when(x.created_at)}`)));

  function draw(before) {
    const earlier = new Map((before?.results || []).map((r) => [`${r.case}#${r.repeat}`, r]));
    $("other-head").hidden = $("change-head").hidden = !before;
    $("cases").tBodies[0].replaceChildren(...experiment.results.map((r) => {
      const was = earlier.get(`${r.case}#${r.repeat}`);
      const change = !was ? "new"
        : RANK[r.outcome] > RANK[was.outcome] ? "better"
        : RANK[r.outcome] < RANK[was.outcome] ? "worse" : "same";
      const failed = r.verdicts.filter((v) => !v.passed);
      return el(
        "tr",
        { "data-case": r.case },
        el("td", {}, r.repeat ? `${r.case} #${r.repeat + 1}` : r.case),
        el("td", {}, outcomeBadge(r.outcome)),
        before ? el("td", {}, was ? outcomeBadge(was.outcome) : "–") : null,
        before ? el("td", { class: `change change-${change}` }, change) : null,
        el("td", { class: "failed" },
          r.error ? el("div", {}, `could not run: ${r.error}`) : null,
          failed.map((v) => el("div", { title: v.detail }, `✗ ${v.name}: ${v.detail.split("\n")[0]}`))),
        el("td", {}, money(r.cost_usd)),
        el("td", {}, duration(r.duration_s)),
        el("td", {}, r.tokens ?? "–"),
        el("td", {}, r.run_id ? el("a", { href: `/runs/${r.run_id}` }, r.run_id.slice(0, 12)) : "–"),
      );
    }));
  }

  draw(null);
  $("compare-with").addEventListener("change", async (event) => {
    const id = event.target.value;
    draw(id ? await api(`/v1/experiments/${id}`) : null);
  });
}

// --- Start ---------------------------------------------------------------------------------

const page = document.body.dataset.page;
pageHeader(page);
const started =
  page === "runs" ? runsPage()
  : page === "run" ? runPage(location.pathname.split("/").pop())
  : page === "threads" ? threadsPage()
  : page === "agents" ? agentsPage()
  : page === "thread" ? threadPage(location.pathname.split("/").pop())
  : page === "experiments" ? experimentsPage()
  : page === "experiment" ? experimentPage(location.pathname.split("/").pop())
  : Promise.resolve();
started.catch((error) => {
  const main = document.querySelector("main");
  main.prepend(el("p", { class: "error" }, error.message || String(error)));
});
