// Two runs' sequence diagrams side by side (a fork or replay and its original, or any two runs),
// each without timings so that the text compares line by line; the first arrow that differs is
// marked in both.

// A Mermaid message line: `a1->>+a2: text`, `a2-->>-a1: text`, `a1-xa2: text`, ...
const ARROW = /^\s*[\w.]+\s*--?(>>|x|\))[+-]?\s*[\w.]+\s*:/;

// The first line where the two texts differ (-1: none), and the number of that line's arrow
// (the diagrams number their arrows from 1; 0: the difference is not on an arrow).
export function firstDifference(one, other) {
  const a = one.split("\n");
  const b = other.split("\n");
  let arrows = 0;
  for (let i = 0; i < Math.max(a.length, b.length); i += 1) {
    const isArrow = ARROW.test(a[i] || "") || ARROW.test(b[i] || "");
    if (isArrow) arrows += 1;
    if (a[i] !== b[i]) return { line: i, arrow: isArrow ? arrows : 0, here: a[i] || "", there: b[i] || "" };
  }
  return { line: -1, arrow: 0, here: "", there: "" };
}

// Mark arrow number `n` of a rendered diagram (its number and its text).
export function markArrow(svg, n, mark = "first-difference") {
  const numbers = [...svg.querySelectorAll(".sequenceNumber")];
  const texts = svg.querySelectorAll(".messageText");
  numbers.forEach((number, index) => {
    if (Number(number.textContent) !== n) return;
    for (const node of [number, texts[index]]) if (node) node.classList.add(mark);
  });
}
